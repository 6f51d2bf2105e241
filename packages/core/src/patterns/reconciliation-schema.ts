// The two tables of the reconciliation sweeper: each sweeper's watermark, and the differences it found that are
// not resolved yet (the "unreconciled" gauge counts those). Plain SQL, run by `migrateReconciliation`.

import { retryDatabaseStart, type DatabaseStartRetryOptions } from '../database-start-retry.js';
import { sqlExecutorOf, type SqlTransaction } from './sql-executor.js';
import { quoteIdentifier } from './sql-identifier.js';

/** Default schema of the sweeper's tables: the inbox's. */
export const DEFAULT_RECONCILIATION_SCHEMA = 'inboxkit';

/**
 * The statements that create the sweeper's tables in `schema` (idempotent: `IF NOT EXISTS`). Default schema is
 * `inboxkit`, the inbox's.
 *
 * @example
 * for (const statement of reconciliationSchemaStatements('billing')) await pool.query(statement);
 */
export function reconciliationSchemaStatements(schema = DEFAULT_RECONCILIATION_SCHEMA): string[] {
  const s = quoteIdentifier(schema);
  return [
    `CREATE SCHEMA IF NOT EXISTS ${s}`,
    `CREATE TABLE IF NOT EXISTS ${s}.reconciliation_watermarks (
  sweeper text PRIMARY KEY,
  watermark timestamptz NOT NULL,
  swept_at timestamptz NOT NULL
)`,
    `CREATE TABLE IF NOT EXISTS ${s}.reconciliation_differences (
  sweeper text NOT NULL,
  operation_key text NOT NULL,
  kind text NOT NULL,
  detail text,
  operation jsonb NOT NULL,
  operation_at timestamptz NOT NULL,
  first_found_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  resolved_at timestamptz,
  resolution text,
  PRIMARY KEY (sweeper, operation_key)
)`,
    `CREATE INDEX IF NOT EXISTS reconciliation_differences_open ON ${s}.reconciliation_differences (sweeper) WHERE resolved_at IS NULL`,
  ];
}

/**
 * The same statements as one SQL script, for teams that run their own migration tool
 * (`migrations/0004_reconciliation.sql` is generated from it). Default schema is `inboxkit`.
 *
 * @example
 * writeFileSync('migrations/V7__reconciliation.sql', reconciliationSchemaSql('billing'));
 */
export function reconciliationSchemaSql(schema = DEFAULT_RECONCILIATION_SCHEMA): string {
  return `${reconciliationSchemaStatements(schema).join(';\n\n')};\n`;
}

/**
 * Creates the sweeper's tables in `schema` (default `inboxkit`) on `db` — a Kysely instance, a node-postgres
 * client or any `SqlExecutor`. Idempotent. While the database is down or restarting it keeps trying, as
 * `migrateInbox` does (`DatabaseStartRetryOptions`; default without a time limit).
 *
 * @example
 * await migrateReconciliation(db);
 */
export async function migrateReconciliation(
  db: SqlTransaction,
  options: { readonly schema?: string } & DatabaseStartRetryOptions = {},
): Promise<void> {
  const executor = sqlExecutorOf(db);
  await retryDatabaseStart(
    'migrateReconciliation',
    async () => {
      for (const statement of reconciliationSchemaStatements(options.schema))
        await executor.execute(statement, []);
    },
    options,
  );
}
