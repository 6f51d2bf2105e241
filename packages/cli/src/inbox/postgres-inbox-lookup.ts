// The replay engine's InboxLookup on the Postgres inbox: rows through core's inspection API, and the last
// replay audit line of each id straight from the audit table (one statement for many ids; the inspection API
// reads one id at a time), which parking needs (see replay/parked.ts).

import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { PostgresInboxStore } from '@inboxkit/core/postgres';

import type { InboxLookup } from './inbox-lookup.js';
import { inspectorInboxLookup } from './inspector-inbox-lookup.js';

/**
 * An InboxLookup over the Postgres inbox `store` (built over `db`).
 *
 * @example
 * const lookup = postgresInboxLookup(db, inboxStore(db, { schema: 'app' }));
 */
export function postgresInboxLookup(
  db: Kysely<unknown>,
  store: Pick<PostgresInboxStore, 'findRows' | 'names'>,
): InboxLookup {
  const table = sql.raw(store.names.qualifiedReplayTable);
  return {
    ...inspectorInboxLookup(store),
    async lastReplayOutcomes(consumer, ids) {
      const out = new Map<string, string>();
      const unique = [...new Set(ids)];
      for (let i = 0; i < unique.length; i += 1_000) {
        const { rows } = await sql<{ message_id: string; outcome: string }>`
          select distinct on (message_id) message_id, outcome from ${table}
          where consumer = ${consumer} and message_id = any(${unique.slice(i, i + 1_000)}::text[])
          order by message_id, at desc, id desc`.execute(db);
        for (const r of rows) out.set(r.message_id, r.outcome);
      }
      return out;
    },
  };
}
