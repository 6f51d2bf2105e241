// A fresh inbox schema per test file on the real Postgres, an effects table the handler writes in the
// inbox transaction, and a core consumer whose handler can be made to fail on purpose.

import { idempotentConsumer, PermanentError } from '@inboxkit/core';
import type { IdempotentConsumer } from '@inboxkit/core';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Transaction } from 'kysely';
import pg from 'pg';

import { requireService } from './services.js';

/** One schema with the inbox, its replay audit and an `effects` table. */
export interface InboxDatabase {
  readonly db: Kysely<unknown>;
  readonly schema: string;
  readonly store: PostgresInboxStore;
  /** Effects applied, per message id. */
  effects(): Promise<Map<string, number>>;
  /** Every inbox row's state, for "nothing changed" checks. */
  rows(consumer: string): Promise<{ id: string; status: string; attempts: number; replayCount: number }[]>;
  dispose(): Promise<void>;
}

/** Creates schema `cli_<unique>` with the inbox (core's migrations) and an effects table. */
export async function inboxDatabase(): Promise<InboxDatabase> {
  const pool = new pg.Pool({ connectionString: requireService('DATABASE_URL'), max: 6 });
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  const schema = uniqueName('cli')
    .replace(/[^A-Za-z0-9_]/g, '_')
    .toLowerCase();
  await migrateInbox(db, { schema });
  await sql`create table ${sql.table(`${schema}.effects`)} (message_id text not null, at timestamptz not null default now())`.execute(
    db,
  );
  const store = new PostgresInboxStore({ db, schema });
  return {
    db,
    schema,
    store,
    async effects() {
      const { rows } = await sql<{ message_id: string; n: number }>`
        select message_id, count(*)::int as n from ${sql.table(`${schema}.effects`)} group by message_id`.execute(
        db,
      );
      return new Map(rows.map((r) => [r.message_id, r.n]));
    },
    async rows(consumer) {
      const { rows } = await sql<{
        message_id: string;
        status: string;
        attempts: number;
        replay_count: number;
      }>`
        select h.message_id, h.status, h.attempts, coalesce(d.replay_count, 0) as replay_count
        from ${sql.table(`${schema}.inbox`)} h
          left join ${sql.table(`${schema}.inbox_details`)} d on d.consumer = h.consumer and d.message_id = h.message_id
        where h.consumer = ${consumer} order by h.message_id`.execute(db);
      return rows.map((r) => ({
        id: r.message_id,
        status: r.status,
        attempts: r.attempts,
        replayCount: r.replay_count,
      }));
    },
    async dispose() {
      await sql`drop schema if exists ${sql.id(schema)} cascade`.execute(db).catch(() => undefined);
      await db.destroy();
    },
  };
}

/** A consumer that records every outcome and writes one effect row per processed message. */
export interface EffectConsumer {
  readonly consumer: IdempotentConsumer<unknown, unknown>;
  readonly recorder: OutcomeRecorder;
  /** Ids whose handler throws a PermanentError (dead-lettered at once). */
  readonly failing: Set<string>;
}

/** Builds the consumer `name` over `database`. */
export function effectConsumer(database: InboxDatabase, name: string): EffectConsumer {
  const recorder = new OutcomeRecorder();
  const failing = new Set<string>();
  const consumer = idempotentConsumer<unknown, Transaction<unknown>>({
    name,
    store: database.store,
    maxAttempts: 3,
    backoff: { initialDelayMs: 50, maxDelayMs: 200 },
    handler: async (message, { tx }) => {
      if (failing.has(message.id)) throw new PermanentError(`refusing ${message.id} on purpose`);
      await sql`insert into ${sql.table(`${database.schema}.effects`)} (message_id) values (${message.id})`.execute(
        tx,
      );
    },
    hooks: { onOutcome: recorder.hook },
  });
  return { consumer: consumer as IdempotentConsumer<unknown, unknown>, recorder, failing };
}
