// `inboxkit prune`: deletes expired completed rows through core's pruner.

import type { PruneCommand } from '../command-line.js';
import type { CommandContext } from './command-context.js';

/** Runs `prune`; returns the exit code. */
export async function runPrune(_command: PruneCommand, _context: CommandContext): Promise<number> {
  throw new Error('prune: waiting for @inboxkit/core/postgres');
}
