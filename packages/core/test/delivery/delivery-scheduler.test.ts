// The scheduler of pushed deliveries: `concurrency` at once in arrival order, a crash suspect alone with nothing
// overtaking it, one run per key, fresh deliveries batched, and what never started handed back on stop.

import { describe, expect, it } from 'vitest';
import { DeliveryScheduler } from '../../src/index.js';
import type { DeliverySchedulerOptions } from '../../src/index.js';

interface D {
  readonly id: string;
  readonly suspect?: boolean;
  readonly key?: string;
  readonly stale?: boolean;
}

/** A scheduler whose runs end when the test says so; `started` lists each run's ids as it starts. */
function harness(options: Partial<DeliverySchedulerOptions<D>> = {}) {
  const started: string[] = [];
  const ends = new Map<string, () => void>();
  let running = true;
  const scheduler = new DeliveryScheduler<D>({
    concurrency: 2,
    running: () => running,
    alone: (d) => d.suspect === true,
    stale: (d) => d.stale === true,
    run: (batch) => {
      const name = batch.map((d) => d.id).join('+');
      started.push(name);
      return new Promise<void>((resolve) => ends.set(name, resolve));
    },
    ...options,
  });
  /** Lets the end of a run (a promise chain) reach the scheduler. */
  const settle = () => new Promise<void>((resolve) => setImmediate(resolve));
  return { scheduler, started, settle, ends, stop: () => (running = false) };
}

describe('DeliveryScheduler', () => {
  it('runs at most `concurrency` at once, in arrival order', async () => {
    const h = harness();
    for (const id of ['a', 'b', 'c']) h.scheduler.push({ id });
    expect(h.started).toEqual(['a', 'b']);
    h.ends.get('a')!();
    await h.settle();
    expect(h.started).toEqual(['a', 'b', 'c']);
  });

  it('runs a suspect alone: it waits for the running ones, nothing overtakes it, nothing starts beside it', async () => {
    const h = harness({ concurrency: 3 });
    h.scheduler.push({ id: 'a' });
    h.scheduler.push({ id: 's', suspect: true });
    h.scheduler.push({ id: 'b' });
    expect(h.started).toEqual(['a']); // 'b' does not overtake the waiting suspect
    h.ends.get('a')!();
    await h.settle();
    expect(h.started).toEqual(['a', 's']);
    expect(h.scheduler.running).toBe(1);
    h.ends.get('s')!();
    await h.settle();
    expect(h.started).toEqual(['a', 's', 'b']);
  });

  it('runs one delivery per key at a time, in order; other keys pass the waiting one', async () => {
    const h = harness({ concurrency: 3, key: (d) => d.key });
    h.scheduler.push({ id: 'x1', key: 'x' });
    h.scheduler.push({ id: 'x2', key: 'x' });
    h.scheduler.push({ id: 'y1', key: 'y' });
    expect(h.started).toEqual(['x1', 'y1']);
    h.ends.get('x1')!();
    await h.settle();
    expect(h.started).toEqual(['x1', 'y1', 'x2']);
  });

  it('batches fresh deliveries already waiting, up to maxBatch, when they may join; a suspect never joins', async () => {
    const h = harness({ concurrency: 1, maxBatch: 3, joins: (_, next) => next.key !== 'other' });
    h.scheduler.push({ id: 'first' }); // starts alone: nothing waits yet
    for (const id of ['a', 'b', 'c', 'd']) h.scheduler.push({ id });
    h.scheduler.push({ id: 's', suspect: true });
    h.ends.get('first')!();
    await h.settle();
    expect(h.started).toEqual(['first', 'a+b+c']);
    h.ends.get('a+b+c')!();
    await h.settle();
    expect(h.started).toEqual(['first', 'a+b+c', 'd']); // the suspect behind it does not join
  });

  it('drops a stale delivery when reached, and hands back what never started on stop', async () => {
    const h = harness({ concurrency: 1 });
    h.scheduler.push({ id: 'a' });
    h.scheduler.push({ id: 'gone', stale: true });
    h.scheduler.push({ id: 'b' });
    h.stop();
    expect(h.scheduler.stop().map((d) => d.id)).toEqual(['gone', 'b']);
    let idle = false;
    const waiting = h.scheduler.idle().then(() => (idle = true));
    await h.settle();
    expect(idle).toBe(false); // 'a' still runs
    h.ends.get('a')!();
    await waiting;
    expect(h.started).toEqual(['a']); // nothing starts once stopped
  });

  it('goes on after a run rejects', async () => {
    let calls = 0;
    const scheduler = new DeliveryScheduler<D>({
      concurrency: 1,
      running: () => true,
      alone: () => false,
      run: () => (calls++ === 0 ? Promise.reject(new Error('bug')) : Promise.resolve()),
    });
    scheduler.push({ id: 'a' });
    scheduler.push({ id: 'b' });
    await scheduler.idle();
    expect(calls).toBe(2);
  });
});
