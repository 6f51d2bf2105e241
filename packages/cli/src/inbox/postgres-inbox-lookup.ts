// InboxLookup on the Postgres inbox table (DESIGN §3 columns): one indexed query per batch of ids.

import { sql } from 'kysely';
import type { Kysely } from 'kysely';

import type { InboxLookup, InboxRowState, InboxRowStatus } from './inbox-lookup.js';

/** Where the inbox table is. */
export interface InboxTableName {
  /** Default is `inboxkit`. */
  readonly schema?: string | undefined;
  /** Default is `inbox`. */
  readonly table?: string | undefined;
}

interface Row {
  message_id: string;
  status: InboxRowStatus;
  attempts: number;
  dead_letter_reason: string | null;
  locked_until: Date | null;
  available_at: Date | null;
  replay_count: number | null;
}

/**
 * Reads inbox rows by (consumer, message id) with the caller's Kysely instance (never destroyed here).
 *
 * @example
 * const lookup = new PostgresInboxLookup(db, { schema: 'app', table: 'inbox' });
 * const rows = await lookup.find('orders', ['o-1', 'o-2']);
 */
export class PostgresInboxLookup implements InboxLookup {
  readonly #db: Kysely<unknown>;
  readonly #table: ReturnType<typeof sql.table>;

  constructor(db: Kysely<unknown>, name: InboxTableName = {}) {
    this.#db = db;
    this.#table = sql.table(`${name.schema ?? 'inboxkit'}.${name.table ?? 'inbox'}`);
  }

  async find(consumer: string, ids: readonly string[]): Promise<ReadonlyMap<string, InboxRowState>> {
    const out = new Map<string, InboxRowState>();
    const unique = [...new Set(ids)];
    for (let i = 0; i < unique.length; i += 1_000) {
      const chunk = unique.slice(i, i + 1_000);
      const { rows } = await sql<Row>`
        select message_id, status, attempts, dead_letter_reason, locked_until, available_at, replay_count
        from ${this.#table}
        where consumer = ${consumer} and message_id = any(${chunk}::text[])`.execute(this.#db);
      for (const r of rows) {
        out.set(r.message_id, {
          status: r.status,
          attempts: Number(r.attempts),
          deadLetterReason: r.dead_letter_reason ?? undefined,
          lockedUntil: r.locked_until ?? undefined,
          availableAt: r.available_at ?? undefined,
          replayCount: r.replay_count === null ? undefined : Number(r.replay_count),
        });
      }
    }
    return out;
  }
}
