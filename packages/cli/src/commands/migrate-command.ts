// `inboxkit migrate`: applies core's inbox migrations.

import type { MigrateCommand } from '../command-line.js';
import type { CommandContext } from './command-context.js';

/** Runs `migrate`; returns the exit code. */
export async function runMigrate(_command: MigrateCommand, _context: CommandContext): Promise<number> {
  throw new Error('migrate: waiting for @inboxkit/core/postgres');
}
