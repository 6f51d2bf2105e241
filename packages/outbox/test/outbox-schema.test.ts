// The schema: migrations/0002_outbox.sql in step with its source, validated names, migrateOutbox idempotent.

import { readFileSync } from 'node:fs';
import { ConfigurationError } from '@inboxkit/core';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outboxSqlFile, SQL_FILE } from '../scripts/generate-sql.js';
import { migrateOutbox, outboxSchemaSql, resolveOutboxTableNames } from '../src/index.js';
import { openOutboxDb, type OutboxTestDb } from './support.js';

describe('outbox schema', () => {
  it('keeps migrations/0002_outbox.sql in step with its source (run packages/outbox/scripts/generate-sql.ts)', () => {
    expect(readFileSync(SQL_FILE, 'utf8')).toBe(outboxSqlFile());
  });

  it('quotes every identifier and refuses anything but plain names', () => {
    expect(outboxSchemaSql(resolveOutboxTableNames({ schema: 'app', table: 'out' }))).toContain('CREATE TABLE IF NOT EXISTS "app"."out"');
    expect(() => resolveOutboxTableNames({ table: 'x; DROP TABLE users' })).toThrow(ConfigurationError);
    expect(() => resolveOutboxTableNames({ schema: 'a"b' })).toThrow(/plain identifier/);
    expect(() => resolveOutboxTableNames({ table: 'a'.repeat(60) })).toThrow(/at most/);
  });

  describe('on Postgres', () => {
    let t: OutboxTestDb;
    beforeAll(async () => {
      t = await openOutboxDb('outbox_schema');
    });
    afterAll(async () => {
      await t?.close();
    });

    it('migrates with its own migration table, idempotently', async () => {
      const again = await migrateOutbox(t.db, { schema: t.schema.schema });
      expect(again.results).toEqual([]);
      const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM information_schema.tables
        WHERE table_schema = ${t.schema.schema} AND table_name IN ('outbox', 'inboxkit_outbox_migrations')`.execute(t.db);
      expect(Number(rows[0]?.n)).toBe(2);
    });
  });
});
