// The replay engine's InboxLookup on top of core's inspection API (`InboxInspector.findRows`), so the CLI
// reads inbox rows exactly as the store that writes them.

import type { InboxInspector, InboxRow } from '@inboxkit/core';

import type { InboxLookup } from './inbox-lookup.js';

/**
 * An InboxLookup over any store's inspection API (`PostgresInboxStore`, the in-memory store). Looks ids up
 * 1,000 at a time.
 *
 * @example
 * const lookup = inspectorInboxLookup(new PostgresInboxStore({ db, schema: 'app' }));
 */
export function inspectorInboxLookup(inspector: Pick<InboxInspector, 'findRows'>): InboxLookup {
  return {
    async find(consumer, ids) {
      const out = new Map<string, InboxRow>();
      const unique = [...new Set(ids)];
      for (let i = 0; i < unique.length; i += 1_000) {
        for (const row of await inspector.findRows(consumer, unique.slice(i, i + 1_000)))
          out.set(row.messageId, row);
      }
      return out;
    },
  };
}
