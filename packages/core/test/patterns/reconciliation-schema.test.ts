// The reconciliation sweeper's tables: migrations/0004_reconciliation.sql in step with the source of
// migrateReconciliation, and the file run by hand gives the same tables as the function.

import { readFileSync } from 'node:fs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RECONCILIATION_SQL_FILE, reconciliationSqlFile } from '../../scripts/generate-sql.js';
import { migrateReconciliation } from '../../src/patterns/index.js';
import { openTestDatabase, type TestDatabase } from '../support/postgres.js';

describe('reconciliation schema', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('reconciliation_schema');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('keeps migrations/0004_reconciliation.sql in step with its source (run packages/core/scripts/generate-sql.ts)', () => {
    expect(readFileSync(RECONCILIATION_SQL_FILE, 'utf8')).toBe(reconciliationSqlFile());
  });

  it('creates from the plain SQL file the same tables and indexes as migrateReconciliation', async () => {
    const shape = async (schema: string): Promise<string[]> => {
      const columns = await sql<{ c: string }>`
        SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') AS c
        FROM information_schema.columns WHERE table_schema = ${schema} AND table_name LIKE 'reconciliation%' ORDER BY table_name, ordinal_position`.execute(
        t.db,
      );
      const indexes = await sql<{ c: string }>`
        SELECT indexdef AS c FROM pg_indexes WHERE schemaname = ${schema} AND tablename LIKE 'reconciliation%' ORDER BY indexname`.execute(
        t.db,
      );
      return [...columns.rows, ...indexes.rows].map((r) =>
        r.c.replaceAll(`${schema}.`, 'S.').replaceAll(`"${schema}".`, 'S.'),
      );
    };
    await migrateReconciliation(t.db, { schema: t.schema });
    const fromFile = `${t.schema}_f`;
    try {
      await sql
        .raw(readFileSync(RECONCILIATION_SQL_FILE, 'utf8').replaceAll('"inboxkit"', `"${fromFile}"`))
        .execute(t.db);
      const expected = await shape(t.schema);
      expect(expected.some((c) => c.startsWith('reconciliation_differences.operation_key text NO'))).toBe(
        true,
      );
      expect(expected.some((c) => c.includes('reconciliation_differences_open'))).toBe(true);
      expect(await shape(fromFile)).toEqual(expected);
    } finally {
      await sql.raw(`DROP SCHEMA IF EXISTS "${fromFile}" CASCADE`).execute(t.db);
    }
  });
});
