// A test server in a process of its own (`node --import tsx <fixture> <json>`), for tests that must see whether
// the server survives: the fixture prints `LISTENING <url>` once it listens.

import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

export interface ChildServer {
  readonly url: string;
  readonly child: ChildProcess;
  /** The lines the process wrote to stdout so far. */
  lines(): readonly string[];
  /** Everything the process wrote to stderr so far (its crash, if it crashed). */
  stderr(): string;
  /** Whether the process is still running. */
  alive(): boolean;
  kill(): void;
}

/** Starts `fixture` (a path) with `input` as its one JSON argument; resolves once it listens. */
export function startChildServer(fixture: string, input: unknown): Promise<ChildServer> {
  const child = spawn(
    process.execPath,
    ['--conditions=@inboxkit/source', '--import', 'tsx', fixture, JSON.stringify(input)],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let err = '';
  const lines: string[] = [];
  child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const alive = (): boolean => child.exitCode === null && child.signalCode === null;
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const parts = out.split('\n');
      out = parts.pop() ?? '';
      for (const line of parts) {
        lines.push(line);
        if (!line.startsWith('LISTENING ')) continue;
        resolve({
          url: line.slice('LISTENING '.length),
          child,
          lines: () => lines,
          stderr: () => err,
          alive,
          kill: () => {
            if (alive()) child.kill('SIGKILL');
          },
        });
      }
    });
    child.on('error', reject);
    child.on('exit', (code, signal) =>
      reject(new Error(`server exited (${code ?? signal}) before listening: ${err}`)),
    );
  });
}
