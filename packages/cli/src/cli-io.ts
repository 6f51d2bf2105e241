// What `runCli` reads and writes instead of touching `process` directly, so tests drive the whole command
// line in-process and inject a clock.

import type { Clock } from './replay/clock.js';

/** A writable text stream (`process.stdout` fits). */
export interface OutputStream {
  write(chunk: string): unknown;
  /** True on a terminal: progress is drawn as a bar instead of one line per message. */
  readonly isTTY?: boolean | undefined;
  /** Terminal width, for the progress bar. */
  readonly columns?: number | undefined;
}

/** The process-level surroundings of a CLI run. */
export interface CliIo {
  readonly stdout: OutputStream;
  readonly stderr: OutputStream;
  /** Environment variables (connection fallbacks, `USER`). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Default is the system clock. */
  readonly clock?: Clock | undefined;
  /** Aborted on Ctrl-C: a replay stops after the message in hand. */
  readonly signal?: AbortSignal | undefined;
  /** Base directory of relative paths such as `--config`. Default is `process.cwd()`. */
  readonly cwd?: string | undefined;
}
