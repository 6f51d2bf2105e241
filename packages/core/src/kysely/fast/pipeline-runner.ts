// The two shapes the fast paths share (pg-fast-paths.ts builds them, statement-once.ts uses them), in a file of
// their own so that neither of those imports the other.

import type { DatabaseConnection } from 'kysely';
import type { SqlRow } from '../../postgres/sql-seam.js';

/** A connection lender of the seam: guarded while `fn` runs, never handed back inside a transaction. */
export type Hold = <T>(fn: (connection: DatabaseConnection) => Promise<T>) => Promise<T>;

/**
 * Sends `sql` (statements separated by `;`) in one round trip; resolves to each statement's command tag and
 * rows. With `extended`, sends it with the extended protocol, which refuses more than one statement.
 */
export type PipelineRunner = (
  connection: DatabaseConnection,
  sql: string,
  extended?: boolean,
) => Promise<{ readonly command: string | undefined; readonly rows: SqlRow[] }[]>;
