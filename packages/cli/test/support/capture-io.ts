// A CliIo that captures what the CLI writes, for in-process runs of `runCli`.

import { appendFileSync } from 'node:fs';

import type { CliIo } from '../../src/cli-io.js';
import type { Clock } from '../../src/replay/clock.js';

/** Captured output plus the io to pass to `runCli`. */
export interface CapturedIo {
  readonly io: CliIo;
  readonly stdout: () => string;
  readonly stderr: () => string;
}

/** Set CLI_TEST_TRACE=<file> to append everything the CLI writes to stderr there as it happens. */
const trace = process.env.CLI_TEST_TRACE;

/** An io whose streams append to strings; `env` defaults to an empty environment. */
export function captureIo(
  options: {
    env?: Record<string, string | undefined>;
    tty?: boolean;
    clock?: Clock;
    signal?: AbortSignal;
  } = {},
): CapturedIo {
  let out = '';
  let err = '';
  return {
    io: {
      stdout: { write: (s: string) => (out += s), isTTY: options.tty ?? false },
      stderr: {
        write: (s: string) => {
          if (trace !== undefined && trace !== '') appendFileSync(trace, s);
          return (err += s);
        },
        isTTY: options.tty ?? false,
        columns: 100,
      },
      env: options.env ?? {},
      clock: options.clock,
      signal: options.signal,
    },
    stdout: () => out,
    stderr: () => err,
  };
}
