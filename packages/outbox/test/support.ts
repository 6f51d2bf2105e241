// Test helpers: a Kysely on a fresh schema with the outbox migrated, a recording publisher that can be made to
// fail, and waitFor, which awaits a condition instead of sleeping a fixed time.

import type { OutgoingMessage, Publisher } from '@inboxkit/core';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { createTestSchema, type TestSchema } from '../../../test/support/services.js';
import { migrateOutbox } from '../src/outbox-migrations.js';

export interface OutboxTestDb {
  readonly db: Kysely<unknown>;
  readonly schema: TestSchema;
  /** Undispatched, unparked rows. */
  backlog(): Promise<number>;
  close(): Promise<void>;
}

export async function openOutboxDb(prefix: string): Promise<OutboxTestDb> {
  const schema = await createTestSchema(prefix);
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: schema.pool }) });
  await migrateOutbox(db, { schema: schema.schema });
  return {
    db,
    schema,
    backlog: async () => {
      const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM ${sql.raw(`"${schema.schema}"."outbox"`)}
        WHERE dispatched_at IS NULL AND parked_at IS NULL`.execute(db);
      return Number(rows[0]?.n ?? 0);
    },
    close: async () => {
      await schema.cleanup();
    },
  };
}

export interface RecordingPublisher extends Publisher {
  readonly published: OutgoingMessage[];
  /** While true, publish rejects (a broker that is down). */
  failing: boolean;
}

export function recordingPublisher(): RecordingPublisher {
  const self: RecordingPublisher = {
    published: [],
    failing: false,
    async publish(messages) {
      if (self.failing) throw new Error('broker unavailable');
      self.published.push(...messages);
    },
    async close() {},
  };
  return self;
}

export async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
