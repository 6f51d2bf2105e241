// Starts and kills the crash-test consumer process (fixtures/consumer-process.ts) the way production
// would: a separate Node process running the package's TypeScript sources.

import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ConsumerProcessConfig } from './fixtures/consumer-process.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/consumer-process.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** A running consumer process. */
export interface ConsumerProcess {
  readonly child: ChildProcess;
  /** Resolves with the exit code or signal when the process ends. */
  readonly exited: Promise<string>;
  /** What it wrote to stderr (for failure messages). */
  stderr(): string;
  kill(signal?: NodeJS.Signals): Promise<string>;
}

/** Spawns the fixture and resolves once it printed "ready" (or rejects if it died first). */
export async function startConsumerProcess(config: ConsumerProcessConfig): Promise<ConsumerProcess> {
  const child = spawn(process.execPath, ['--conditions=@inboxkit/source', '--import', 'tsx', FIXTURE], {
    cwd: ROOT,
    env: { ...process.env, FIXTURE_CONFIG: JSON.stringify(config) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<string>((resolve) => {
    child.on('exit', (code, signal) => resolve(signal ?? String(code)));
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('ready\n')) resolve();
    });
    void exited.then((how) =>
      reject(new Error(`consumer process exited (${how}) before it was ready:\n${err}`)),
    );
  });
  return {
    child,
    exited,
    stderr: () => err,
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
