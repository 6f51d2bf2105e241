// A database clock a test can move: `now()` and `clock_timestamp()` defined in a schema of their own that the
// test's sessions put before pg_catalog on their search_path, so the inbox's functions (which call them
// unqualified) and the store's clock read the test's time. Midnight, a week passing, a lease expiring: set, not
// waited for.

import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { databaseUrl, type TestDB } from './postgres.js';

/** A clock stored in `<schema>.clock`, read by the sessions of `open()`'s pools. */
export interface FakeClock {
  readonly schema: string;
  /** Sets the time every session of this clock reads from now on. */
  set(at: Date): Promise<void>;
  /** A pool (and a Kysely over it) whose sessions read this clock; ended by `close()`. */
  open(max?: number, applicationName?: string): { readonly pool: pg.Pool; readonly db: Kysely<TestDB> };
  /** The search_path option of this clock's sessions (`-c search_path=…`), for a child process. */
  readonly options: string;
  /** Ends the pools and drops the clock's schema. */
  close(): Promise<void>;
}

export async function createFakeClock(name: string, at: Date): Promise<FakeClock> {
  const schema = `${name}_clock`;
  const admin = new pg.Client({ connectionString: databaseUrl() });
  await admin.connect();
  try {
    await admin.query(`CREATE SCHEMA "${schema}";
CREATE TABLE "${schema}".clock (at timestamptz NOT NULL);
INSERT INTO "${schema}".clock VALUES ('${at.toISOString()}');
CREATE FUNCTION "${schema}".now() RETURNS timestamptz LANGUAGE sql STABLE AS $$ SELECT at FROM "${schema}".clock $$;
CREATE FUNCTION "${schema}".clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE AS $$ SELECT at FROM "${schema}".clock $$;`);
  } finally {
    await admin.end();
  }
  const options = `-c search_path=${schema},pg_catalog,public`;
  const pools: pg.Pool[] = [];
  const control = new pg.Pool({ connectionString: databaseUrl(), max: 1 });
  pools.push(control);
  return {
    schema,
    options,
    async set(time: Date) {
      await control.query(`UPDATE "${schema}".clock SET at = $1`, [time]);
    },
    open(max = 4, applicationName = 'fake-clock') {
      const pool = new pg.Pool({ connectionString: databaseUrl(), options, max, application_name: applicationName });
      pool.on('error', () => undefined);
      pools.push(pool);
      return { pool, db: new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) }) };
    },
    async close() {
      await control.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
      await Promise.all(pools.map((p) => p.end().catch(() => undefined)));
    },
  };
}
