// The checks of the transport conformance suite, one object each, so `describeTransportConformance` can
// declare them as vitest tests and the kit's own tests can run a single check against a deliberately broken
// transport to prove that it fails.

import { HEADERS, PermanentError, RetryableError } from '@inboxkit/core';
import type { DeadLetterOutcome } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'vitest';

import {
  ConformanceFixture,
  gate,
  header,
  resolveConformanceOptions,
  text,
} from './transport-conformance-fixture.js';
import type { TransportConformanceOptions } from './transport-conformance-fixture.js';
import type { TransportFeatures, TransportHarnessFactory } from './transport-harness.js';
import { uniqueName } from './unique-name.js';

/** The id of one conformance check. */
export type TransportConformanceCheckId =
  | 'acks-once'
  | 'retry'
  | 'dead-letter'
  | 'max-attempts'
  | 'durable-before-ack'
  | 'stop-drains'
  | 'duplicates'
  | 'ordering'
  | 'crash-charges-running'
  | 'store-outage'
  | 'oversized-dead-letter';

/** One check of the suite. */
export interface TransportConformanceCheck {
  readonly id: TransportConformanceCheckId;
  /** The vitest test name. */
  readonly title: string;
  /** Whether the check applies to a transport with these features. */
  readonly applies: (features: TransportFeatures) => boolean;
  readonly run: (fixture: ConformanceFixture, features: TransportFeatures) => Promise<void>;
}

/** Every check, in the order the suite declares them. */
export const TRANSPORT_CONFORMANCE_CHECKS: readonly TransportConformanceCheck[] = [
  {
    id: 'acks-once',
    title: 'acks a processed message once: a restarted consumer does not receive it again',
    applies: () => true,
    run: async (f) => {
      const first = f.consumer();
      const running = await f.start(first);
      const ids = [uniqueName('m'), uniqueName('m'), uniqueName('m')];
      await f.harness.publish(ids.map((id, n) => ({ id, body: JSON.stringify({ kind: 'ok', n }) })));
      for (const id of ids) await first.recorder.waitFor(id, 'processed', f.wait);
      await f.expectNoRedelivery(ids, running);
      expect(ids.map((id) => f.effectCount(id))).toEqual([1, 1, 1]);
      expect(first.recorder.counts()).toMatchObject({ processed: 3, retry: 0, 'dead-letter': 0 });
    },
  },
  {
    id: 'retry',
    title:
      'redelivers a retried message with the attempt count rising, after its delay, until it is processed',
    applies: () => true,
    run: async (f, features) => {
      const attempts: { attempt: number; at: number }[] = [];
      const test = f.consumer({
        handler: async (message, context) => {
          attempts.push({ attempt: context.attempt, at: Date.now() });
          if (context.attempt === 1) throw new RetryableError('downstream busy', { delayMs: 150 });
          if (context.attempt === 2) throw new Error('connection reset');
          f.applyEffect(message.id, context.tx);
        },
      });
      const running = await f.start(test);
      const id = uniqueName('retry');
      await f.harness.publish([{ id, body: JSON.stringify({ kind: 'ok' }) }]);
      const processed = await test.recorder.waitFor(id, 'processed', f.wait);

      const events = test.recorder.events.filter((e) => e.id === id);
      expect(
        events.map((e) => e.outcome.status),
        test.recorder.describe(id),
      ).toEqual(['retry', 'retry', 'processed']);
      expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 3]);
      expect(processed.outcome).toMatchObject({ status: 'processed', attempt: 3 });
      expect(events[0]!.outcome).toMatchObject({ status: 'retry', attempt: 1, delayMs: 150 });
      if (features.deliveryCount) {
        const counts = events.map((e) => e.message.deliveryCount);
        expect(
          counts.every((c) => typeof c === 'number'),
          `deliveryCount missing: ${String(counts)}`,
        ).toBe(true);
        expect(counts, 'the broker delivery count must rise on every redelivery').toEqual(
          [...counts].sort((a, b) => a! - b!),
        );
        expect(new Set(counts).size).toBe(3);
      }
      if (features.nativeDelay) {
        for (const [i, event] of events.slice(0, 2).entries()) {
          const delayMs = event.outcome.status === 'retry' ? event.outcome.delayMs : 0;
          const next = attempts[i + 1]!;
          expect(
            next.at - event.at,
            `attempt ${i + 2} came before the retry delay of ${delayMs} ms`,
          ).toBeGreaterThanOrEqual(delayMs - 5);
        }
      }
      await f.expectNoRedelivery([id], running);
      expect(f.effectCount(id)).toBe(1);
    },
  },
  {
    id: 'dead-letter',
    title:
      'dead-letters a permanent error, an undecodable body, a schema-invalid payload and a missing id with the documented headers, and acks the source',
    applies: () => true,
    run: async (f) => {
      const test = f.consumer({
        handler: async (message, context) => {
          if (message.payload.kind === 'permanent') throw new PermanentError('card declined');
          f.applyEffect(message.id, context.tx);
        },
      });
      const running = await f.start(test);
      const ids = {
        permanent: uniqueName('perm'),
        undecodable: uniqueName('undec'),
        schema: uniqueName('schema'),
        ok: uniqueName('ok'),
      };
      const bodies = {
        permanent: JSON.stringify({ kind: 'permanent' }),
        undecodable: '{not json',
        schema: JSON.stringify({ kind: 42 }),
        missing: JSON.stringify({ kind: 'no-id' }),
      };
      await f.harness.publish([
        { id: ids.permanent, body: bodies.permanent },
        { id: ids.undecodable, body: bodies.undecodable },
        { id: ids.schema, body: bodies.schema },
        { body: bodies.missing },
        { id: ids.ok, body: JSON.stringify({ kind: 'ok' }) },
      ]);
      await test.recorder.waitFor(ids.ok, 'processed', f.wait);
      const letters = await f.harness.readDeadLetters(4, f.options.waitTimeoutMs);
      const byReason = new Map(letters.map((l) => [header(l, HEADERS.reason), l]));
      expect(
        [...byReason.keys()].sort(),
        `dead letters: ${JSON.stringify(letters.map((l) => l.headers))}`,
      ).toEqual(['missing-id', 'permanent-error', 'schema-invalid', 'undecodable']);
      expect(letters).toHaveLength(4);

      const cases = [
        { reason: 'permanent-error', id: ids.permanent, body: bodies.permanent },
        { reason: 'undecodable', id: ids.undecodable, body: bodies.undecodable },
        { reason: 'schema-invalid', id: ids.schema, body: bodies.schema },
        { reason: 'missing-id', id: undefined, body: bodies.missing },
      ];
      for (const c of cases) {
        const letter = byReason.get(c.reason)!;
        const where = `${c.reason} dead letter headers ${JSON.stringify(letter.headers)}`;
        const event = test.recorder.events.find((e) => e.id === c.id && e.outcome.status === 'dead-letter');
        expect(event, `no dead-letter outcome for ${c.reason}\n${test.recorder.describe()}`).toBeDefined();
        const outcome = event!.outcome as DeadLetterOutcome;
        expect(header(letter, HEADERS.consumer), where).toBe(test.consumer.name);
        expect(header(letter, HEADERS.originalId), where).toBe(c.id);
        expect(header(letter, HEADERS.attempts), where).toBe(String(outcome.attempts));
        expect(header(letter, HEADERS.errorName), where).toBe(outcome.error?.name);
        expect(header(letter, HEADERS.errorMessage), where).toBe(outcome.error?.message);
        expect(header(letter, HEADERS.deadLetteredAt), where).toBeDefined();
        expect(header(letter, HEADERS.sourceTransport), where).toBeDefined();
        expect(text(letter.body), where).toBe(c.body);
        if (c.id !== undefined) expect(letter.id, where).toBe(c.id);
      }
      const permanent = byReason.get('permanent-error')!;
      expect(header(permanent, HEADERS.errorName)).toBe('PermanentError');
      expect(header(permanent, HEADERS.errorMessage)).toBe('card declined');
      expect(header(permanent, HEADERS.attempts)).toBe('1');

      await f.expectNoRedelivery([ids.permanent, ids.undecodable, ids.schema, undefined], running);
      expect(test.recorder.count('dead-letter')).toBe(4);
      expect(f.effectCount(ids.permanent) + f.effectCount(ids.schema)).toBe(0);
      expect(f.effectCount(ids.ok)).toBe(1);
    },
  },
  {
    id: 'max-attempts',
    title: 'dead-letters a message that fails maxAttempts times with reason max-attempts',
    applies: () => true,
    run: async (f) => {
      const test = f.consumer({
        maxAttempts: 3,
        handler: async () => {
          throw new Error('database says no');
        },
      });
      const running = await f.start(test);
      const id = uniqueName('poison');
      await f.harness.publish([{ id, body: JSON.stringify({ kind: 'ok' }) }]);
      await test.recorder.waitFor(id, 'dead-letter', f.wait);
      const [letter, ...more] = await f.harness.readDeadLetters(1, f.options.waitTimeoutMs);
      expect(more).toHaveLength(0);
      expect(letter, 'no dead letter').toBeDefined();
      expect(header(letter!, HEADERS.reason)).toBe('max-attempts');
      expect(header(letter!, HEADERS.originalId)).toBe(id);
      expect(header(letter!, HEADERS.attempts)).toBe('3');
      expect(header(letter!, HEADERS.consumer)).toBe(test.consumer.name);
      expect(header(letter!, HEADERS.errorName)).toBe('Error');
      expect(header(letter!, HEADERS.errorMessage)).toBe('database says no');
      expect(
        test.recorder.outcomes(id).map((o) => o.status),
        test.recorder.describe(id),
      ).toEqual(['retry', 'retry', 'dead-letter']);
      await f.expectNoRedelivery([id], running);
    },
  },
  {
    id: 'durable-before-ack',
    title:
      'acks nothing before the outcome is durable: after a crash mid-handler the message comes back and is applied once',
    applies: () => true,
    run: async (f) => {
      const store = new InMemoryInboxStore();
      const name = uniqueName('crash');
      const held = gate();
      const first = f.consumer({
        name,
        store,
        handler: async (message, context) => {
          held.enter();
          await held.wait();
          f.applyEffect(message.id, context.tx);
        },
      });
      await f.start(first);
      const id = uniqueName('inflight');
      await f.harness.publish([{ id, body: JSON.stringify({ kind: 'ok' }) }]);
      await held.entered;
      await f.harness.crash();
      // The dying process's transaction rolls back, as Postgres does when the connection drops.
      held.fail(new Error('process died'));

      const second = f.consumer({ name, store });
      await f.start(second);
      await second.recorder.waitFor(id, 'processed', f.wait).catch((error: unknown) => {
        throw new Error(
          `the message did not come back after a crash: was it acked before its outcome was durable?\n${String(error)}`,
        );
      });
      expect(f.effectCount(id)).toBe(1);
      expect(first.recorder.count('processed', id)).toBe(0);
    },
  },
  {
    id: 'stop-drains',
    title: 'stop() drains in-flight work: the running handler completes and its message is settled',
    applies: () => true,
    run: async (f) => {
      const held = gate();
      const log: string[] = [];
      const test = f.consumer({
        handler: async (message, context) => {
          held.enter();
          await held.wait();
          f.applyEffect(message.id, context.tx);
          log.push('handler finished');
        },
      });
      const running = await f.start(test, { closeTimeoutMs: f.options.waitTimeoutMs });
      const id = uniqueName('draining');
      await f.harness.publish([{ id, body: JSON.stringify({ kind: 'ok' }) }]);
      await held.entered;
      const stopped = running.stop().then(() => log.push('stop resolved'));
      // Let stop() begin (stop fetching) before the handler can finish; nothing here waits for a message.
      await sleep(50);
      held.open();
      await stopped;
      expect(log).toEqual(['handler finished', 'stop resolved']);
      expect(test.recorder.outcomes(id).map((o) => o.status)).toEqual(['processed']);
      await f.expectNoRedelivery([id], running);
      expect(f.effectCount(id)).toBe(1);
    },
  },
  {
    id: 'duplicates',
    title: 'applies a message published three times once',
    applies: () => true,
    run: async (f) => {
      const test = f.consumer();
      await f.start(test);
      const id = uniqueName('dup');
      const copy = { id, body: JSON.stringify({ kind: 'ok' }) };
      await f.harness.publish([copy, copy, copy]);
      await test.recorder.waitForCount(3, { id, status: ['processed', 'duplicate'], ...f.wait });
      expect(test.recorder.count('processed', id)).toBe(1);
      expect(test.recorder.count('duplicate', id)).toBe(2);
      expect(f.effectCount(id)).toBe(1);
    },
  },
  {
    id: 'ordering',
    title: 'keeps order per key, also when a message is retried',
    applies: (features) => features.ordering === 'key',
    run: async (f) => {
      const order = new Map<string, number[]>();
      let failedOnce = false;
      const test = f.consumer({
        handler: async (message, context) => {
          const key = message.payload.key!;
          if (key === 'a' && message.payload.n === 1 && !failedOnce) {
            failedOnce = true;
            throw new RetryableError('hold the line', { delayMs: 100 });
          }
          order.set(key, [...(order.get(key) ?? []), message.payload.n!]);
          f.applyEffect(message.id, context.tx);
        },
      });
      await f.start(test, { concurrency: 4 });
      const messages = [0, 1, 2, 3, 4, 5].flatMap((n) =>
        ['a', 'b'].map((key) => ({
          id: uniqueName(`${key}${n}`),
          key,
          body: JSON.stringify({ kind: 'ok', n, key }),
        })),
      );
      await f.harness.publish(messages);
      for (const m of messages) await test.recorder.waitFor(m.id, 'processed', f.wait);
      expect(order.get('a')).toEqual([0, 1, 2, 3, 4, 5]);
      expect(order.get('b')).toEqual([0, 1, 2, 3, 4, 5]);
      expect(failedOnce).toBe(true);
    },
  },
  {
    id: 'crash-charges-running',
    title:
      'a crash charges at most the messages that were running: two crashes, then every message is processed',
    applies: declaresDeliveryKit,
    run: async (f) => {
      const store = new InMemoryInboxStore();
      const name = uniqueName('charge');
      const ids = [0, 1, 2, 3, 4].map((n) => uniqueName(`c${n}`));
      // Per process that died: the messages whose handler ran in it (none finishes: each dies running).
      const ranIn: Set<string>[] = [];
      const crashOnce = async (concurrency: number): Promise<void> => {
        const held = gate();
        const ran = new Set<string>();
        ranIn.push(ran);
        const dying = f.consumer({
          name,
          store,
          backoff: AT_ONCE,
          handler: async (message) => {
            ran.add(message.id);
            held.enter();
            await held.wait();
          },
        });
        await f.start(dying, { concurrency });
        await held.entered;
        await f.harness.crash();
        held.fail(new Error('process died'));
      };
      await f.harness.publish(ids.map((id, n) => ({ id, body: JSON.stringify({ kind: 'ok', n }) })));
      await crashOnce(1);
      // The second process could run four at once: what came back after the first crash must not all be charged.
      await crashOnce(4);
      const last = f.consumer({ name, store, backoff: AT_ONCE });
      await f.start(last, { concurrency: 4 });
      for (const id of ids) await last.recorder.waitFor(id, 'processed', f.wait);
      const charged = ids.map((id) => {
        const processed = last.recorder.outcomes(id).find((o) => o.status === 'processed');
        return processed?.status === 'processed' ? processed.attempt - 1 : 0;
      });
      const running = ranIn.map((ran) => ran.size);
      expect(
        charged.reduce((a, b) => a + b, 0),
        `attempts charged by the crashes per message ${JSON.stringify(charged)}; messages running in each ` +
          `process that died ${JSON.stringify(running)}: a crash charged messages that were not running`,
      ).toBeLessThanOrEqual(running.reduce((a, b) => a + b, 0));
      expect(last.recorder.count('dead-letter')).toBe(0);
      expect(ids.map((id) => f.effectCount(id))).toEqual([1, 1, 1, 1, 1]);
    },
  },
  {
    id: 'store-outage',
    title: 'a store outage spends no broker delivery count and dead-letters nothing',
    applies: declaresDeliveryKit,
    run: async (f, features) => {
      const outage = { down: true, failures: 0 };
      const test = f.consumer({ store: failingStore(new InMemoryInboxStore(), outage), maxAttempts: 2 });
      const running = await f.start(test);
      const id = uniqueName('outage');
      await f.harness.publish([{ id, body: JSON.stringify({ kind: 'ok' }) }]);
      // Longer than maxAttempts: each try during the outage would be an attempt if the broker counted it.
      await test.recorder.waitForCount(4, { id, status: ['retry'], ...f.wait });
      outage.down = false;
      const processed = await test.recorder.waitFor(id, 'processed', f.wait);
      // The message each outcome was about: the same object while the transport holds the delivery in process.
      const seen = test.recorder.events.filter((e) => e.id === id).map((e) => e.message);
      expect(processed.outcome, test.recorder.describe(id)).toMatchObject({
        status: 'processed',
        attempt: 1,
      });
      expect(
        test.recorder.outcomes(id).every((o) => o.status !== 'retry' || o.reason === 'store-unavailable'),
      ).toBe(true);
      if (features.deliveryCount) {
        expect(
          seen.map((m) => m.deliveryCount),
          'the broker delivery count rose during the outage',
        ).toEqual(seen.map(() => seen[0]!.deliveryCount));
      }
      if (features.redeliverSpendsCount === true) {
        expect(
          new Set(seen).size,
          `the broker delivered the message ${new Set(seen).size} times during the outage: each spent its count`,
        ).toBe(1);
      }
      const letters = await f.harness.readDeadLetters(1, f.options.quietPeriodMs);
      expect(
        letters.map((l) => l.headers),
        'dead letters after a store outage',
      ).toEqual([]);
      await f.expectNoRedelivery([id], running);
      expect(f.effectCount(id)).toBe(1);
    },
  },
  {
    id: 'oversized-dead-letter',
    title: 'an oversized dead letter goes out in a smaller form and never loops; the messages behind it run',
    applies: declaresDeliveryKit,
    run: async (f) => {
      const big = uniqueName('oversized');
      const oversized = f.harness.oversizedDeadLetter?.(big);
      if (oversized === undefined) {
        throw new Error('the harness must provide oversizedDeadLetter() for the oversized-dead-letter check');
      }
      const test = f.consumer({
        handler: async (message, context) => {
          if (message.payload.kind === 'oversized')
            throw new PermanentError(`refused: ${'why '.repeat(500)}`);
          f.applyEffect(message.id, context.tx);
        },
      });
      const running = await f.start(test, { concurrency: 1 });
      const after = [uniqueName('after'), uniqueName('after')];
      await f.harness.publish([
        oversized,
        ...after.map((id, n) => ({ id, body: JSON.stringify({ kind: 'ok', n }) })),
      ]);
      for (const id of after) await test.recorder.waitFor(id, 'processed', f.wait);
      const letters = await f.harness.readDeadLetters(1, f.options.waitTimeoutMs);
      // The id as the DLQ reader gives it (replay uses it): the minimal form carries it once, in message-id, not
      // in x-inboxkit-original-id.
      expect(
        letters.map((l) => l.id),
        `dead letters: ${JSON.stringify(letters.map((l) => header(l, HEADERS.reason)))}`,
      ).toEqual([big]);
      const letter = letters[0]!;
      expect(header(letter, HEADERS.reason)).toBe('permanent-error');
      expect(header(letter, HEADERS.consumer)).toBe(test.consumer.name);
      expect(
        header(letter, HEADERS.dropped),
        'the dead letter should say what its smaller form lacks',
      ).toBeDefined();
      await f.expectNoRedelivery([big], running);
      expect(
        test.recorder.outcomes(big).map((o) => o.status),
        `the oversized message looped: ${test.recorder.describe(big)}`,
      ).toEqual(['dead-letter']);
    },
  },
];

/**
 * Runs one check against a fresh harness from `factory`, outside `describeTransportConformance`: rejects with
 * the check's assertion error when the transport does not conform. Throws if the check does not apply to
 * `features`.
 *
 * @example
 * await expect(runTransportConformanceCheck('durable-before-ack', features, brokenHarness)).rejects.toThrow();
 */
export async function runTransportConformanceCheck(
  id: TransportConformanceCheckId,
  features: TransportFeatures,
  factory: TransportHarnessFactory,
  options: TransportConformanceOptions = {},
): Promise<void> {
  const check = TRANSPORT_CONFORMANCE_CHECKS.find((c) => c.id === id);
  if (!check) throw new Error(`unknown conformance check ${JSON.stringify(id)}`);
  if (!check.applies(features))
    throw new Error(`the conformance check ${JSON.stringify(id)} does not apply to these features`);
  const fixture = new ConformanceFixture(await factory(), resolveConformanceOptions(options));
  let failure: unknown;
  try {
    await check.run(fixture, features);
  } catch (error) {
    failure = error;
  }
  try {
    await fixture.dispose();
  } catch (error) {
    failure ??= error;
  }
  if (failure !== undefined) throw failure;
}

/**
 * The dying processes' handlers fail once the process is gone (their transactions roll back) and core records
 * that failure: with no backoff, the next process finds each row claimable at once, so no retry redelivery (which
 * a broker's count would charge) mixes with what the crashes charged.
 */
const AT_ONCE = Object.freeze({ initialDelayMs: 1, multiplier: 1, maxDelayMs: 1, jitter: 'none' as const });

/** The delivery-kit checks run on transports that declare their outage capability (`redeliverSpendsCount`). */
function declaresDeliveryKit(features: TransportFeatures): boolean {
  return features.redeliverSpendsCount !== undefined;
}

/** `store`, failing every call with a connection error while `outage.down`. */
function failingStore(
  store: InMemoryInboxStore,
  outage: { down: boolean; failures: number },
): InMemoryInboxStore {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function' || property === 'constructor') return value;
      return (...args: unknown[]) => {
        if (outage.down) {
          outage.failures += 1;
          const error = Object.assign(new Error('connect ECONNREFUSED (the store is down)'), {
            code: 'ECONNREFUSED',
          });
          return Promise.reject(error);
        }
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}
