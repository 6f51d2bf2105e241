// Smoke: the Postgres the tests use is a real server with real transactions.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, requireService, type TestSchema } from '../support/services.js';

describe('postgres smoke', () => {
  let db: TestSchema;

  beforeAll(async () => {
    db = await createTestSchema('smoke_pg');
    await db.pool.query('create table item (id int primary key, label text not null)');
  });

  afterAll(async () => {
    await db?.cleanup();
  });

  it('is a PostgreSQL 15+ server with enough connections for the suites', async () => {
    const settings = requireService('postgres');
    expect(settings.url).toMatch(/^postgres(ql)?:\/\//);
    const { rows } = await db.pool.query<{ version: number; max: number; fsync: string }>(
      `select current_setting('server_version_num')::int as version,
              current_setting('max_connections')::int as max,
              current_setting('fsync') as fsync`,
    );
    expect(rows[0]!.version).toBeGreaterThanOrEqual(150000);
    expect(rows[0]!.max).toBeGreaterThanOrEqual(100);
    expect(rows[0]!.fsync).toBe('on');
  });

  it('commits and rolls back transactions, visibly to another connection', async () => {
    const writer = await db.pool.connect();
    const reader = await db.pool.connect();
    try {
      await writer.query('begin');
      await writer.query(`insert into item values (1, 'committed')`);
      // Uncommitted work is invisible to another session.
      expect((await reader.query('select count(*)::int as n from item')).rows[0].n).toBe(0);
      await writer.query('commit');
      expect((await reader.query('select label from item where id = 1')).rows).toEqual([
        { label: 'committed' },
      ]);

      await writer.query('begin');
      await writer.query(`insert into item values (2, 'rolled back')`);
      await writer.query(`update item set label = 'changed' where id = 1`);
      await writer.query('rollback');
      expect((await reader.query('select id, label from item order by id')).rows).toEqual([
        { id: 1, label: 'committed' },
      ]);

      // A unique violation aborts the transaction: nothing of it survives.
      await writer.query('begin');
      await writer.query(`insert into item values (3, 'three')`);
      await expect(writer.query(`insert into item values (1, 'duplicate')`)).rejects.toMatchObject({
        code: '23505',
      });
      await writer.query('rollback');
      expect((await reader.query('select count(*)::int as n from item')).rows[0].n).toBe(1);
    } finally {
      writer.release();
      reader.release();
    }
  });

  it('isolates each test file in its own schema', async () => {
    const { rows } = await db.pool.query<{ schema: string }>('select current_schema() as schema');
    expect(rows[0]!.schema).toBe(db.schema);
  });
});
