// A relay holds its claim transaction open while the broker confirms. A Postgres backend terminated in that
// window (a restart, pg_terminate_backend) used to surface as an unhandled 'error' event on the checked-out
// pg client and end the process; the relay must instead fail that batch, keep running, and publish the row again
// with the same id.

import type { OutgoingMessage, Publisher } from '@inboxkit/core';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueue, startOutboxRelay, type OutboxRelay } from '../src/index.js';
import { openOutboxDb, waitFor, type OutboxTestDb } from './support.js';

describe('outbox relay, backend terminated while the broker confirms', () => {
  let t: OutboxTestDb;
  let relay: OutboxRelay | undefined;
  beforeAll(async () => {
    t = await openOutboxDb('outbox_relay_term');
  });
  afterAll(async () => {
    await relay?.stop();
    await t?.close();
  });

  it('fails that batch without crashing, then publishes the row again with the same id', async () => {
    const opts = { schema: t.schema.schema };
    const id = await t.db.transaction().execute((tx) => enqueue(tx, { destination: 'orders', body: 'one' }, opts));

    const published: OutgoingMessage[] = [];
    let release: (() => void) | undefined;
    let calls = 0;
    const publisher: Publisher = {
      async publish(messages) {
        calls++;
        // The first publish waits until the test has killed the relay's backend; later ones go through.
        if (calls === 1) await new Promise<void>((resolve) => (release = resolve));
        published.push(...messages);
      },
      async close() {},
    };
    relay = startOutboxRelay({ db: t.db, publishers: { default: publisher }, pollIntervalMs: 50, ...opts });

    await waitFor(() => release !== undefined);
    const { rows } = await sql<{ pid: number }>`SELECT pid FROM pg_stat_activity
      WHERE state = 'idle in transaction' AND pid <> pg_backend_pid()
        AND query LIKE ${`%${t.schema.schema}%FOR UPDATE SKIP LOCKED%`}`.execute(t.db);
    expect(rows).toHaveLength(1);
    await sql`SELECT pg_terminate_backend(${rows[0]!.pid})`.execute(t.db);
    // Give node-postgres the socket's end (the moment the unguarded client used to emit its 'error').
    await new Promise((resolve) => setTimeout(resolve, 200));
    release!();

    await waitFor(async () => (await t.backlog()) === 0);
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(published.map((m) => m.id)).toEqual(Array.from({ length: published.length }, () => id));
  });
});
