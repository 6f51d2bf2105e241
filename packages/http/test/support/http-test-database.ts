// Real Postgres for the HTTP tests: a fresh schema per file with the idempotency-key table and an `effects`
// table without a unique key, so a double effect is counted instead of prevented.

import { Kysely, PostgresDialect, sql, type Generated } from 'kysely';
import { createTestSchema, type TestSchema } from '../../../../test/support/services.js';
import { migrateIdempotencyKeys } from '../../src/index.js';

export interface HttpTestDB {
  effects: { seq: Generated<string>; label: string };
}

export interface HttpTestDatabase {
  readonly db: Kysely<HttpTestDB>;
  readonly schema: string;
  readonly connectionString: string;
  /** Number of effects with this label. */
  effects(label: string): Promise<number>;
  close(): Promise<void>;
}

export async function openHttpTestDatabase(prefix: string): Promise<HttpTestDatabase> {
  const test: TestSchema = await createTestSchema(prefix, { max: 30 });
  const db = new Kysely<HttpTestDB>({ dialect: new PostgresDialect({ pool: test.pool }) });
  // Kysely's Migrator introspects every schema's tables; another test file dropping its schema at that moment
  // fails the introspection ("schema … does not exist"). That is the other file's race, not ours: try again.
  for (let attempt = 1; ; attempt++) {
    try {
      await migrateIdempotencyKeys(db, { schema: test.schema });
      break;
    } catch (error) {
      if (attempt >= 5 || !/schema "[^"]+" does not exist/.test(String(error))) throw error;
    }
  }
  await sql
    .raw(`CREATE TABLE "${test.schema}".effects (seq bigserial PRIMARY KEY, label text NOT NULL)`)
    .execute(db);
  return {
    db,
    schema: test.schema,
    connectionString: test.connectionString,
    async effects(label) {
      const result = await db
        .selectFrom('effects')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('label', '=', label)
        .executeTakeFirstOrThrow();
      return Number(result.n);
    },
    async close() {
      await test.cleanup();
    },
  };
}
