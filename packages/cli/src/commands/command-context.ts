// What every command receives from `runCli`.

import type { CliIo } from '../cli-io.js';
import type { CliServices } from '../cli-services.js';
import type { Clock } from '../replay/clock.js';

/** The run's surroundings, resolved once. */
export interface CommandContext {
  readonly io: CliIo;
  readonly services: CliServices;
  readonly clock: Clock;
}

/** Exit codes of the `inboxkit` command. */
export const EXIT = Object.freeze({
  ok: 0,
  /** The command ran but something failed (a message not replayed, a doctor check failed). */
  failed: 1,
  /** The command line is wrong. */
  usage: 2,
  /** The command could not run: a connection or configuration problem. */
  cannotRun: 3,
  /** Interrupted (Ctrl-C); rerunning is safe. */
  interrupted: 130,
});
