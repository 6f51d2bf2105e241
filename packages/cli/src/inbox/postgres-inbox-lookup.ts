// The replay engine's InboxLookup on the Postgres inbox, through core's inspection API only: the rows, and the
// last audit line of each id (one statement for 1,000 ids), which parking needs (see replay/parked.ts).

import type { Kysely } from 'kysely';
import type { PostgresInboxStore } from '@inboxkit/core/postgres';

import type { InboxLookup } from './inbox-lookup.js';
import { inspectorInboxLookup } from './inspector-inbox-lookup.js';

/**
 * An InboxLookup over the Postgres inbox `store` (`_db` is unused: kept so callers need not change).
 *
 * @example
 * const lookup = postgresInboxLookup(db, inboxStore(db, { schema: 'app' }));
 */
export function postgresInboxLookup(
  _db: Kysely<unknown>,
  store: Pick<PostgresInboxStore, 'findRows' | 'lastAuditOutcomes'>,
): InboxLookup {
  return {
    ...inspectorInboxLookup(store),
    lastReplayOutcomes: (consumer, ids) => store.lastAuditOutcomes(consumer, ids),
  };
}
