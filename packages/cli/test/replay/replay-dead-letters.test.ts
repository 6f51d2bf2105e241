// The replay engine against in-process ports: what it publishes, what it removes, what it predicts, and
// that interruptions and failures lose nothing.

import { fingerprintPayload, HEADERS, parseReplayMarker } from '@inboxkit/core';
import { describe, expect, it } from 'vitest';

import { replayDeadLetters } from '../../src/replay/replay-dead-letters.js';
import {
  deadLetter,
  FakeClock,
  MemoryDeadLetterQueue,
  MemoryInbox,
  MemoryPublisher,
} from '../support/memory-ports.js';

const ids = (n: number, prefix = 'm'): string[] => Array.from({ length: n }, (_, i) => `${prefix}-${i + 1}`);

function deliverAll(inbox: MemoryInbox, publisher: MemoryPublisher, from = 0): void {
  for (const m of publisher.published.slice(from)) inbox.deliver('orders', m);
}

describe('replayDeadLetters', () => {
  it('publishes each dead letter to its source with the original id, body, headers and a replay marker, then removes it', async () => {
    const dlq = new MemoryDeadLetterQueue([
      deadLetter('a', {
        headers: { traceparent: '00-abc-01', 'content-type': 'application/json' },
        body: '{"a":1}',
      }),
    ]);
    const publisher = new MemoryPublisher();
    const summary = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      publisher,
      requestedBy: 'alice',
      replayId: 'r-1',
    });

    expect(summary.replayed).toBe(1);
    expect(dlq.entries).toHaveLength(0);
    const [sent] = publisher.published;
    expect(sent).toMatchObject({ destination: 'orders-topic', id: 'a', body: '{"a":1}' });
    expect(sent!.headers).toMatchObject({ traceparent: '00-abc-01', 'content-type': 'application/json' });
    expect(
      Object.keys(sent!.headers!).filter(
        (h) => h.startsWith('x-inboxkit-') && !h.startsWith('x-inboxkit-replay'),
      ),
    ).toEqual([]);
    expect(sent!.headers![HEADERS.messageId]).toBeUndefined(); // the publisher writes it from `id`
    expect(parseReplayMarker(sent!.headers!)).toMatchObject({ replayId: 'r-1', requestedBy: 'alice' });
  });

  it("leaves the broker's bookkeeping headers behind (a DLQ delivery count would count as attempts)", async () => {
    const entry = deadLetter('a', {
      headers: {
        'x-delivery-count': '3',
        'x-death': '[…]',
        'x-first-death-queue': 'q',
        'x-last-death-reason': 'rejected',
        tenant: 't1',
      },
    });
    const publisher = new MemoryPublisher();
    await replayDeadLetters({
      transport: 'kafka',
      reader: new MemoryDeadLetterQueue([entry]),
      publisher,
      requestedBy: 't',
    });
    expect(
      Object.keys(publisher.published[0]!.headers!).filter((h) => !h.startsWith('x-inboxkit-replay')),
    ).toEqual(['tenant']);
  });

  it('stops when messages it replayed come back to the DLQ, instead of replaying them again and again', async () => {
    for (const keepsMarker of [true, false]) {
      const clock = new FakeClock();
      const dlq = new MemoryDeadLetterQueue(
        ids(5).map((id) => deadLetter(id)),
        'queue',
      );
      const publisher = new MemoryPublisher();
      // The consumer fails every replayed message again at once: a new dead letter at the tail of the DLQ.
      publisher.afterPublish = (m) => {
        const again = deadLetter(m.id, {
          deadLetteredAt: new Date(clock.now() + 1),
          position: `dlq:${m.id}:again`,
          headers: keepsMarker ? { ...m.headers } : {},
        });
        dlq.entries.push(again);
      };
      const summary = await replayDeadLetters({
        transport: 'kafka',
        reader: dlq,
        publisher,
        clock,
        requestedBy: 't',
      });
      expect(summary.stoppedBecause).toBe('caught-up');
      expect(summary.replayed).toBe(5);
      expect(summary.deadLetteredAgain).toEqual(['m-1']);
      expect(publisher.published).toHaveLength(5);
      expect(dlq.entries.map((e) => e.id).sort()).toEqual(ids(5));
    }
  });

  it('uses one replay id for the whole run and generates one when none is given', async () => {
    const dlq = new MemoryDeadLetterQueue(ids(3).map((id) => deadLetter(id)));
    const publisher = new MemoryPublisher();
    const summary = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      publisher,
      requestedBy: 'bob',
    });
    expect(summary.replayId).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(publisher.published.map((m) => parseReplayMarker(m.headers!)?.replayId))).toEqual(
      new Set([summary.replayId]),
    );
  });

  it('predicts from the inbox: dead-lettered reopens, completed is skipped, no row is processed', async () => {
    const inbox = new MemoryInbox();
    inbox.set('orders', 'dead', 'dead_lettered');
    inbox.set('orders', 'done', 'completed');
    inbox.set('orders', 'busy', 'processing');
    inbox.set('orders', 'failing', 'failed');
    const dlq = new MemoryDeadLetterQueue(
      ['dead', 'done', 'new', 'busy', 'failing'].map((id) => deadLetter(id)),
    );
    const summary = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      publisher: new MemoryPublisher(),
      inbox,
      requestedBy: 't',
    });
    expect(summary.entries.map((e) => [e.id, e.inboxStatus, e.prediction])).toEqual([
      ['dead', 'dead_lettered', 'reopen'],
      ['done', 'completed', 'skip-duplicate'],
      ['new', 'none', 'process'],
      ['busy', 'processing', 'in-flight'],
      ['failing', 'failed', 'retry-pending'],
    ]);
    expect(summary.predictions).toMatchObject({
      reopen: 1,
      'skip-duplicate': 1,
      process: 1,
      'in-flight': 1,
      'retry-pending': 1,
    });
  });

  it("predicts with core's replayDecision: a payload mismatch, and a row already reopened under this replay id", async () => {
    const inbox = new MemoryInbox();
    inbox.set('orders', 'same', 'completed', fingerprintPayload({ total: 1 }));
    inbox.set('orders', 'other', 'completed', fingerprintPayload({ total: 1 }));
    inbox.set('orders', 'again', 'dead_lettered');
    inbox.rows.get('orders\u0000again')!.replays.push('r-7');
    const entries = [
      deadLetter('same', { reason: 'payload-mismatch', body: '{"total":1}' }),
      deadLetter('other', { reason: 'payload-mismatch', body: '{"total": 2}' }),
      deadLetter('again'),
    ];
    const dry = await replayDeadLetters({
      transport: 'kafka',
      reader: new MemoryDeadLetterQueue(entries),
      inbox,
      dryRun: true,
      replayId: 'r-7',
      requestedBy: 't',
    });
    expect(dry.entries.map((e) => [e.id, e.prediction])).toEqual([
      ['same', 'skip-duplicate'],
      ['other', 'payload-mismatch'],
      ['again', 'already-replayed'],
    ]);
  });

  it('applies each dead-lettered message once and skips completed ones; a second replay applies nothing more', async () => {
    const inbox = new MemoryInbox();
    const all = ids(100);
    all.forEach((id, i) => inbox.set('orders', id, i % 3 === 0 ? 'completed' : 'dead_lettered'));
    const entries = all.map((id) => deadLetter(id));
    const dlq = new MemoryDeadLetterQueue(entries);
    const publisher = new MemoryPublisher();

    await replayDeadLetters({ transport: 'kafka', reader: dlq, publisher, inbox, requestedBy: 't' });
    deliverAll(inbox, publisher);
    const deadLettered = all.filter((_, i) => i % 3 !== 0);
    expect([...inbox.effects.keys()].sort()).toEqual([...deadLettered].sort());
    expect([...inbox.effects.values()].every((n) => n === 1)).toBe(true);

    // The same batch again (e.g. the DLQ copies were restored from a backup).
    const again = new MemoryDeadLetterQueue(entries);
    const before = publisher.published.length;
    const second = await replayDeadLetters({
      transport: 'kafka',
      reader: again,
      publisher,
      inbox,
      requestedBy: 't',
    });
    deliverAll(inbox, publisher, before);
    expect(second.predictions['skip-duplicate']).toBe(100);
    expect([...inbox.effects.values()].every((n) => n === 1)).toBe(true);
  });

  it('dry run publishes and removes nothing and predicts exactly what the real run then does', async () => {
    for (const kind of ['log', 'queue'] as const) {
      const inbox = new MemoryInbox();
      const all = ids(30);
      all.forEach((id, i) => {
        if (i % 3 === 0) inbox.set('orders', id, 'completed');
        else if (i % 3 === 1) inbox.set('orders', id, 'dead_lettered');
      });
      const dlq = new MemoryDeadLetterQueue(
        all.map((id) => deadLetter(id)),
        kind,
      );
      const publisher = new MemoryPublisher();
      const before = dlq.ids();

      const dry = await replayDeadLetters({
        transport: 'kafka',
        reader: dlq,
        publisher,
        inbox,
        dryRun: true,
        requestedBy: 't',
      });
      expect(publisher.published).toHaveLength(0);
      expect(dlq.ids()).toEqual(before);
      expect(dry.wouldReplay).toBe(30);

      const real = await replayDeadLetters({
        transport: 'kafka',
        reader: dlq,
        publisher,
        inbox,
        requestedBy: 't',
      });
      const outcomes = new Map(publisher.published.map((m) => [m.id, inbox.deliver('orders', m)]));
      const expected = { reopen: 'processed', process: 'processed', 'skip-duplicate': 'duplicate' } as const;
      for (const e of dry.entries)
        expect(outcomes.get(e.id!)).toBe(expected[e.prediction as keyof typeof expected]);
      expect(real.entries.map((e) => [e.id, e.prediction])).toEqual(
        dry.entries.map((e) => [e.id, e.prediction]),
      );
    }
  });

  it('parks a dead letter whose replay failed again: later bulk replays leave it in the DLQ unless includeParked', async () => {
    const inbox = new MemoryInbox();
    for (const id of ['good', 'bad']) inbox.set('orders', id, 'dead_lettered');
    inbox.failing.add('bad');
    const dlq = new MemoryDeadLetterQueue([deadLetter('good'), deadLetter('bad')]);
    const publisher = new MemoryPublisher();
    const first = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      publisher,
      inbox,
      requestedBy: 't',
    });
    expect(first.parked).toBe(0);
    // The consumer: `good` applies, `bad` fails again and goes back to the DLQ.
    for (const m of publisher.published) {
      if (inbox.deliver('orders', m) === 'dead-lettered')
        dlq.entries.push(deadLetter(m.id, { position: `dlq:${m.id}:again` }));
    }
    expect(inbox.effects).toEqual(new Map([['good', 1]]));

    // A bulk dry run and a bulk replay both leave it where it is, and say why.
    const dry = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      inbox,
      dryRun: true,
      requestedBy: 't',
    });
    expect(dry.entries.map((e) => [e.id, e.action])).toEqual([['bad', 'parked']]);
    expect(dry.wouldReplay).toBe(0);
    const published = publisher.published.length;
    const second = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      publisher,
      inbox,
      requestedBy: 't',
    });
    expect(second).toMatchObject({ parked: 1, replayed: 0, failed: 0 });
    expect(second.entries[0]!.detail).toMatch(
      /^parked: a replay reopened it once and it was dead-lettered again/,
    );
    expect(publisher.published).toHaveLength(published);
    expect(dlq.ids()).toEqual(['bad']);

    // Fixed, and asked for: replayed and applied once.
    inbox.failing.delete('bad');
    const third = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      publisher,
      inbox,
      includeParked: true,
      requestedBy: 't',
    });
    expect(third).toMatchObject({ parked: 0, replayed: 1 });
    deliverAll(inbox, publisher, published);
    expect(inbox.effects).toEqual(
      new Map([
        ['good', 1],
        ['bad', 1],
      ]),
    );
    expect(dlq.entries).toHaveLength(0);
  });

  it('parks a dead letter whose last replay was refused before its claim (the audit says dead-letter, the row is unchanged)', async () => {
    const inbox = new MemoryInbox();
    for (const id of ['invalid', 'mismatch', 'skipped', 'never']) inbox.set('orders', id, 'dead_lettered');
    inbox.audit.set('orders\u0000invalid', 'replayed:dead-letter:schema-invalid');
    inbox.audit.set('orders\u0000mismatch', 'refused-payload-mismatch:dead-letter:payload-mismatch');
    inbox.audit.set('orders\u0000skipped', 'replayed:retry:error');
    const dlq = new MemoryDeadLetterQueue(
      ['invalid', 'mismatch', 'skipped', 'never'].map((id) => deadLetter(id)),
    );
    const dry = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      inbox,
      dryRun: true,
      requestedBy: 't',
    });
    expect(dry.entries.map((e) => [e.id, e.action])).toEqual([
      ['invalid', 'parked'],
      ['mismatch', 'parked'],
      ['skipped', 'would-replay'],
      ['never', 'would-replay'],
    ]);
    expect(dry.entries[0]!.detail).toMatch(/its last replay ended as replayed:dead-letter:schema-invalid/);
    const withParked = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      inbox,
      dryRun: true,
      includeParked: true,
      requestedBy: 't',
    });
    expect(withParked).toMatchObject({ wouldReplay: 4, parked: 0 });
  });

  it('filters by reason, time, id and consumer, and leaves the rest in the DLQ', async () => {
    const t0 = new Date('2030-01-01T00:00:00Z');
    const t1 = new Date('2030-01-05T00:00:00Z');
    const entries = [
      deadLetter('a', { reason: 'max-attempts', deadLetteredAt: t0 }),
      deadLetter('b', { reason: 'permanent-error', deadLetteredAt: t1 }),
      deadLetter('c', { reason: 'max-attempts', deadLetteredAt: t1 }),
      deadLetter('d', { reason: 'max-attempts', deadLetteredAt: t1, consumer: 'billing' }),
    ];
    const cases = [
      [{ reasons: ['max-attempts'] }, ['a', 'c', 'd']],
      [{ since: new Date('2030-01-03T00:00:00Z') }, ['b', 'c', 'd']],
      [{ ids: ['b', 'd'] }, ['b', 'd']],
      [{ consumer: 'orders', reasons: ['max-attempts'] }, ['a', 'c']],
    ] as const;
    for (const kind of ['log', 'queue'] as const) {
      for (const [filter, selected] of cases) {
        const dlq = new MemoryDeadLetterQueue(entries, kind);
        const publisher = new MemoryPublisher();
        const summary = await replayDeadLetters({
          transport: 'kafka',
          reader: dlq,
          publisher,
          filter,
          requestedBy: 't',
        });
        expect(publisher.published.map((m) => m.id)).toEqual(selected);
        expect(summary.notSelected).toBe(4 - selected.length);
        expect(dlq.ids().sort()).toEqual(
          ['a', 'b', 'c', 'd'].filter((id) => !(selected as readonly string[]).includes(id)),
        );
      }
    }
  });

  it('stops after --limit replays', async () => {
    const dlq = new MemoryDeadLetterQueue(
      ids(10).map((id) => deadLetter(id)),
      'queue',
    );
    const publisher = new MemoryPublisher();
    const summary = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      publisher,
      limit: 4,
      requestedBy: 't',
    });
    expect(summary.replayed).toBe(4);
    expect(summary.stoppedBecause).toBe('limit');
    expect(dlq.entries).toHaveLength(6);
  });

  it('spaces publishes at the requested rate (measured on the injected clock)', async () => {
    const clock = new FakeClock();
    const dlq = new MemoryDeadLetterQueue(ids(11).map((id) => deadLetter(id)));
    const publisher = new MemoryPublisher();
    const times: number[] = [];
    publisher.afterPublish = () => times.push(clock.now());
    await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      publisher,
      ratePerSecond: 5,
      clock,
      requestedBy: 't',
    });
    expect(times).toHaveLength(11);
    expect(times.at(-1)! - times[0]!).toBe(2_000); // 10 gaps of 200 ms
    for (let i = 1; i < times.length; i += 1) expect(times[i]! - times[i - 1]!).toBe(200);
  });

  it('keeps a dead letter whose publish fails, reports it as failed, and a rerun replays it', async () => {
    const dlq = new MemoryDeadLetterQueue(
      ids(3).map((id) => deadLetter(id)),
      'queue',
    );
    const publisher = new MemoryPublisher();
    publisher.failOn.add('m-2');
    const summary = await replayDeadLetters({ transport: 'kafka', reader: dlq, publisher, requestedBy: 't' });
    expect(summary.failed).toBe(1);
    expect(summary.entries.find((e) => e.id === 'm-2')).toMatchObject({
      action: 'failed',
      detail: expect.stringContaining('broker refused m-2'),
    });
    expect(dlq.ids()).toEqual(['m-2']);

    publisher.failOn.clear();
    const rerun = await replayDeadLetters({ transport: 'kafka', reader: dlq, publisher, requestedBy: 't' });
    expect(rerun.replayed).toBe(1);
    expect(dlq.entries).toHaveLength(0);
  });

  it('reports a published dead letter that could not be removed; the rerun copy is skipped by the inbox', async () => {
    const inbox = new MemoryInbox();
    ids(3).forEach((id) => inbox.set('orders', id, 'dead_lettered'));
    const dlq = new MemoryDeadLetterQueue(
      ids(3).map((id) => deadLetter(id)),
      'queue',
    );
    dlq.removeFailures.add('m-1');
    const publisher = new MemoryPublisher();
    const summary = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      publisher,
      inbox,
      requestedBy: 't',
    });
    expect(summary.entries[0]).toMatchObject({
      id: 'm-1',
      action: 'failed',
      detail: expect.stringContaining('not removed'),
    });
    deliverAll(inbox, publisher);

    dlq.removeFailures.clear();
    const before = publisher.published.length;
    const rerun = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      publisher,
      inbox,
      requestedBy: 't',
    });
    expect(rerun.entries.map((e) => [e.id, e.prediction])).toEqual([['m-1', 'skip-duplicate']]);
    deliverAll(inbox, publisher, before);
    expect([...inbox.effects.entries()].sort()).toEqual([
      ['m-1', 1],
      ['m-2', 1],
      ['m-3', 1],
    ]);
  });

  it('an interrupted run releases what it holds, and a rerun finishes with every message applied once', async () => {
    const inbox = new MemoryInbox();
    const all = ids(20);
    all.forEach((id) => inbox.set('orders', id, 'dead_lettered'));
    const dlq = new MemoryDeadLetterQueue(
      all.map((id) => deadLetter(id)),
      'queue',
    );
    const publisher = new MemoryPublisher();
    const controller = new AbortController();
    publisher.afterPublish = () => {
      if (publisher.published.length === 10) controller.abort();
    };
    const first = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      publisher,
      inbox,
      signal: controller.signal,
      requestedBy: 't',
    });
    expect(first.stoppedBecause).toBe('interrupted');
    expect(first.replayed).toBe(10);
    expect(dlq.entries).toHaveLength(10);
    deliverAll(inbox, publisher);

    publisher.afterPublish = () => undefined;
    const before = publisher.published.length;
    const second = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      publisher,
      inbox,
      requestedBy: 't',
    });
    expect(second.replayed).toBe(10);
    deliverAll(inbox, publisher, before);
    expect(dlq.entries).toHaveLength(0);
    expect(all.map((id) => inbox.effects.get(id))).toEqual(all.map(() => 1));
  });

  it('predicts a second copy of the same message in one run as a duplicate, and the consumer agrees', async () => {
    for (const kind of ['log', 'queue'] as const) {
      const inbox = new MemoryInbox();
      inbox.set('orders', 'a', 'dead_lettered');
      const entries = [
        deadLetter('a'),
        deadLetter('b'),
        deadLetter('a', { position: 'dlq:a-copy' }),
        deadLetter('b', { position: 'dlq:b-copy' }),
      ];
      const dry = await replayDeadLetters({
        transport: 'kafka',
        reader: new MemoryDeadLetterQueue(entries, kind),
        inbox,
        dryRun: true,
        requestedBy: 't',
      });
      expect(dry.entries.map((e) => [e.id, e.prediction])).toEqual([
        ['a', 'reopen'],
        ['b', 'process'],
        ['a', 'skip-duplicate'],
        ['b', 'skip-duplicate'],
      ]);
      const publisher = new MemoryPublisher();
      const dlq = new MemoryDeadLetterQueue(entries, kind);
      await replayDeadLetters({ transport: 'kafka', reader: dlq, publisher, inbox, requestedBy: 't' });
      expect(publisher.published.map((m) => inbox.deliver('orders', m))).toEqual([
        'processed',
        'processed',
        'duplicate',
        'duplicate',
      ]);
      expect(dlq.entries).toHaveLength(0);
    }
  });

  it('stops when a queue hands back what the run released instead of cycling forever', async () => {
    const dlq = new MemoryDeadLetterQueue(
      ids(5).map((id) => deadLetter(id, { reason: 'permanent-error' })),
      'queue',
    );
    const summary = await replayDeadLetters({
      transport: 'kafka',
      reader: dlq,
      publisher: new MemoryPublisher(),
      filter: { reasons: ['max-attempts'] },
      requestedBy: 't',
    });
    expect(summary.stoppedBecause).toBe('wrapped');
    expect(summary.notSelected).toBe(5);
    expect(dlq.entries).toHaveLength(5);
  });

  it('attributes dead letters the broker made itself (no inboxkit headers, or consumer `unknown`) to --consumer', async () => {
    const inbox = new MemoryInbox();
    inbox.set('orders', 'raw', 'dead_lettered');
    inbox.set('orders', 'limit', 'processing');
    const raw = { id: 'raw', body: '{}', headers: { 'message-id': 'raw' }, position: 'dlq:raw' };
    const limit = deadLetter('limit', { consumer: 'unknown', reason: 'delivery-limit' });
    const other = deadLetter('other', { consumer: 'billing' });
    const summary = await replayDeadLetters({
      transport: 'kafka',
      reader: new MemoryDeadLetterQueue([raw, limit, other]),
      inbox,
      filter: { consumer: 'orders' },
      to: 'orders-topic',
      dryRun: true,
      requestedBy: 't',
    });
    expect(summary.entries.map((e) => [e.id, e.consumer, e.prediction])).toEqual([
      ['raw', 'orders', 'reopen'],
      ['limit', 'orders', 'in-flight'],
    ]);
    expect(summary.notSelected).toBe(1);
  });

  it('leaves dead letters without an id or a destination in the DLQ and says why', async () => {
    const noId = deadLetter(undefined);
    const foreign = { id: 'x', body: 'raw', headers: { 'message-id': 'x' }, position: 'dlq:x' };
    const dlq = new MemoryDeadLetterQueue([noId, foreign], 'queue');
    const summary = await replayDeadLetters({
      transport: 'sqs',
      reader: dlq,
      publisher: new MemoryPublisher(),
      requestedBy: 't',
    });
    expect(summary.unreplayable).toBe(2);
    expect(summary.entries.map((e) => e.detail)).toEqual([
      expect.stringContaining('kafka source'),
      expect.stringContaining('pass --to'),
    ]);
    expect(dlq.entries).toHaveLength(2);
  });

  it('sends RabbitMQ replays to the source queue through the default exchange, and honours --to', async () => {
    const entry = deadLetter('a', { transport: 'rabbitmq', destination: 'orders-queue' });
    const publisher = new MemoryPublisher();
    await replayDeadLetters({
      transport: 'rabbitmq',
      reader: new MemoryDeadLetterQueue([entry]),
      publisher,
      requestedBy: 't',
    });
    await replayDeadLetters({
      transport: 'rabbitmq',
      reader: new MemoryDeadLetterQueue([entry]),
      publisher,
      to: 'other',
      requestedBy: 't',
    });
    expect(publisher.published.map((m) => [m.destination, m.routingKey])).toEqual([
      ['', 'orders-queue'],
      ['', 'other'],
    ]);
  });
});
