// Real Postgres for the Nest tests: a schema of its own with the inbox, the idempotency keys and an `effects`
// table without a unique key, so an effect applied twice is counted, never prevented.

import type { Generated, Kysely } from 'kysely';
import type { OutcomeEvent } from '@inboxkit/core';
import { kyselySeam } from '@inboxkit/core/postgres';
import { migrateIdempotencyKeys } from '@inboxkit/http';
import { InboxkitModule } from '../../src/index.js';
import { openInboxTestDatabase, type InboxTestDatabase } from '../../../../test/support/inbox-database.js';

export interface NestTestDB {
  effects: { seq: Generated<string>; consumer: string; message_id: string };
}

export interface NestTestDatabase extends InboxTestDatabase<NestTestDB> {
  /** How many effects carry this message id (or label). */
  effects(messageId: string): Promise<number>;
}

export async function openNestTestDatabase(prefix: string, poolSize = 20): Promise<NestTestDatabase> {
  const t = await openInboxTestDatabase<NestTestDB>(prefix, { poolSize });
  // Kysely's Migrator introspects every schema; another file dropping its schema meanwhile fails it: try again.
  for (let attempt = 1; ; attempt++) {
    try {
      await migrateIdempotencyKeys(t.db as Kysely<unknown>, { schema: t.schema });
      break;
    } catch (error) {
      if (attempt >= 5 || !/schema "[^"]+" does not exist/.test(String(error))) throw error;
    }
  }
  return {
    ...t,
    async effects(messageId) {
      const row = await t.db
        .selectFrom('effects')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('message_id', '=', messageId)
        .executeTakeFirstOrThrow();
      return Number(row.n);
    },
  };
}

/**
 * The module a transport test's app imports: the inbox on `database`, three attempts with short fixed backoff,
 * every outcome pushed to `outcomes`, a silent logger.
 */
export function testInboxkitModule(database: NestTestDatabase, outcomes: OutcomeEvent[]) {
  return InboxkitModule.forRootAsync({
    useFactory: async () => ({
      seam: kyselySeam(database.db),
      inbox: { schema: database.schema },
      consumerDefaults: {
        maxAttempts: 3,
        backoff: { initialDelayMs: 100, maxDelayMs: 200, jitter: 'none' as const },
        hooks: { onOutcome: (event: OutcomeEvent) => void outcomes.push(event) },
      },
      logger: { debug() {}, info() {}, warn() {}, error() {} },
    }),
  });
}
