// Starts and kills the Nest consumer process (fixtures/nest-consumer-process.ts): a separate Node process
// running the package's TypeScript sources, as production would.

import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { NestProcessConfig } from '../fixtures/nest-consumer-process.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/nest-consumer-process.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
// Nest's decorators are TypeScript's legacy ones: tsx reads them from the package's tsconfig.
const TSCONFIG = fileURLToPath(new URL('../../tsconfig.json', import.meta.url));

export interface NestProcess {
  readonly child: ChildProcess;
  /** Resolves with the exit code or signal when the process ends. */
  readonly exited: Promise<string>;
  /** Resolves once the process printed `line`. */
  printed(line: string): Promise<void>;
  stderr(): string;
  kill(signal: NodeJS.Signals): Promise<string>;
}

/** Spawns the fixture and resolves once it printed "ready" (rejects when it died first). */
export async function startNestProcess(config: NestProcessConfig): Promise<NestProcess> {
  const child = spawn(process.execPath, ['--conditions=@inboxkit/source', '--import', 'tsx', FIXTURE], {
    cwd: ROOT,
    env: { ...process.env, FIXTURE_CONFIG: JSON.stringify(config), TSX_TSCONFIG_PATH: TSCONFIG },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  const waiting: { line: string; resolve: () => void }[] = [];
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    for (const w of waiting.filter((x) => out.includes(`${x.line}\n`))) {
      waiting.splice(waiting.indexOf(w), 1);
      w.resolve();
    }
  });
  const exited = new Promise<string>((resolve) =>
    child.on('exit', (code, signal) => resolve(signal ?? String(code))),
  );
  const printed = (line: string): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      if (out.includes(`${line}\n`)) return resolve();
      waiting.push({ line, resolve });
      void exited.then((how) =>
        reject(new Error(`the Nest process exited (${how}) before printing "${line}":\n${err}`)),
      );
    });
  await printed('ready');
  return {
    child,
    exited,
    printed,
    stderr: () => err,
    async kill(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
