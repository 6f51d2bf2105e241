// Real Postgres for the data-layer adapters' tests: one fresh schema per test file with the inbox tables and an
// `effects` table without a unique key (an effect applied twice is counted, never prevented).

import type pg from 'pg';
import { openInboxTestDatabase, type InboxTestDatabase } from '../../../test/support/inbox-database.js';

export type TestDatabase = InboxTestDatabase<unknown>;

/** A schema of its own for `label`'s tests. */
export function openTestDatabase(label: string, poolSize = 10): Promise<TestDatabase> {
  return openInboxTestDatabase<unknown>(`data_${label}`, { poolSize });
}

/** Committed effects of `consumer` (of one message, or all). */
export async function countEffects(
  pool: pg.Pool,
  schema: string,
  consumer: string,
  messageId?: string,
): Promise<number> {
  const where = messageId === undefined ? '' : ' AND message_id = $2';
  const parameters = messageId === undefined ? [consumer] : [consumer, messageId];
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${schema}".effects WHERE consumer = $1${where}`,
    parameters,
  );
  return rows[0]!.n;
}

/** A connection string whose sessions find `schema`'s tables first (for libraries that do not qualify names). */
export function schemaUrl(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set('options', `-c search_path=${schema},public`);
  return u.toString();
}
