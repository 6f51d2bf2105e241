// The intent queue in a real browser (Debian's Chromium through playwright-core, IndexedDB and Web Locks) against
// @inboxkit/http's middleware on real Postgres, counting the server's effects and the requests each key
// brought: offline intents survive a reload and are applied once each, in order; an answer lost after the
// commit (the connection destroyed, or the server SIGKILLed and restarted) is retried with the same key and
// replayed; a reload mid-request, two tabs (with Web Locks, and with the storage lease when navigator.locks is
// removed), two tabs racing the same dedupe keys and a double click each give one effect; a 422 for a reused key is surfaced and not retried; an intent past the retention horizon is
// surfaced and not sent.

import { randomUUID } from 'node:crypto';
import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Intent, IntentQueue } from '../../src/index.js';
import type * as Client from '../../src/index.js';
import { launchBrowser, type TestBrowser } from '../../../cli/test/support/browser.js';
import { eventually } from '../../../../test/support/eventually.js';
import { startChildServer } from '../../../http/test/support/child-server.js';
import { startIntentServer, type IntentServer } from '../support/intent-server.js';

declare global {
  interface Window {
    queue: IntentQueue;
    client: typeof Client;
    skew: number;
    ready: boolean;
    send(label: string, extra?: object): Promise<string>;
    stateOf(key: string): Promise<Intent | undefined>;
  }
}

const WAIT_MS = 60_000; // generous: the machine runs at load 10-60

let server: IntentServer;
let browser: TestBrowser;
let run: string;

beforeAll(async () => {
  server = await startIntentServer();
}, 120_000);
afterAll(async () => {
  await server?.close();
});
beforeEach(async () => {
  run = randomUUID().slice(0, 8);
  browser = await launchBrowser();
}, 120_000);
afterEach(async () => {
  await browser?.close();
});

async function open(): Promise<Page> {
  const page = await browser.context.newPage();
  await page.goto(server.url);
  await page.waitForFunction(() => window.ready);
  return page;
}
const send = (page: Page, label: string) => page.evaluate((l) => window.send(l), `${run}-${label}`);
const settled = (page: Page, key: string) => page.evaluate((k) => window.queue.handle(k).settled(), key);
/** Polls `check` in the page until it is true (waitForFunction does not await an async predicate). */
const until = (page: Page, check: (arg: string) => Promise<boolean>, arg = '') =>
  eventually(() => page.evaluate(check, arg), WAIT_MS);
const effectsOfRun = async () => (await server.effects()).filter((e) => e.label.startsWith(`${run}-`));

describe('@inboxkit/client in Chromium against @inboxkit/http on Postgres', () => {
  it('offline: three intents survive a reload, then are applied once each, in order, when online', async () => {
    const page = await open();
    await browser.context.setOffline(true);
    const keys = [await send(page, 'one'), await send(page, 'two'), await send(page, 'three')];
    await until(page, async (k) => (await window.stateOf(k))?.state === 'waiting-for-network', keys[0]);
    // Offline, the page comes back from where an offline-first app keeps it (here a route, as a service worker).
    for (const [path, body] of Object.entries(server.assets)) {
      await page.route(`${server.url}${path}`, (route) =>
        route.fulfill({ status: 200, contentType: path === '/' ? 'text/html' : 'text/javascript', body }),
      );
    }
    await page.reload();
    await page.waitForFunction(() => window.ready);
    expect((await page.evaluate(() => window.queue.list())).map((i) => i.key)).toEqual(keys);
    expect(keys.map((k) => server.requests(k))).toEqual([0, 0, 0]);
    await browser.context.setOffline(false);
    for (const key of keys) expect((await settled(page, key)).state).toBe('succeeded');
    expect(await effectsOfRun()).toEqual(
      ['one', 'two', 'three'].map((label, i) => ({ key: keys[i], label: `${run}-${label}` })),
    );
  });

  it('an answer lost after the commit: the retry with the same key gets the replay, one effect', async () => {
    const page = await open();
    server.cutAfterCommit(`${run}-paid`);
    const key = await send(page, 'paid');
    const done = await settled(page, key);
    expect(done).toMatchObject({ state: 'succeeded', response: { status: 201, replayed: true } });
    expect(done.attempts).toBeGreaterThanOrEqual(2);
    expect(server.requests(key)).toBe(done.attempts);
    expect(await effectsOfRun()).toEqual([{ key, label: `${run}-paid` }]);
  });

  it('the server SIGKILLed after the commit, before the answer: the retry after its restart is replayed, one effect', async () => {
    const fixture = new URL('../fixtures/killed-server.ts', import.meta.url).pathname;
    const input = { connectionString: server.connectionString, schema: server.schema, port: 0 };
    const first = await startChildServer(fixture, { ...input, killAfterCommit: `${run}-killed` });
    let second: Awaited<ReturnType<typeof startChildServer>> | undefined;
    try {
      const page = await browser.context.newPage();
      await page.goto(first.url);
      await page.waitForFunction(() => window.ready);
      const key = await send(page, 'killed');
      await eventually(async () => !first.alive(), WAIT_MS);
      expect(await effectsOfRun()).toEqual([{ key, label: `${run}-killed` }]);
      // The page retries against a dead port (connection refused, backoff) until the server is back.
      second = await startChildServer(fixture, { ...input, port: Number(new URL(first.url).port) });
      const done = await settled(page, key);
      expect(done).toMatchObject({ state: 'succeeded', response: { status: 201, replayed: true } });
      expect(done.attempts).toBeGreaterThanOrEqual(2);
      expect(await effectsOfRun()).toEqual([{ key, label: `${run}-killed` }]);
    } finally {
      first.kill();
      second?.kill();
    }
  });

  it('a tab reloaded mid-request resumes with the same key: one effect', async () => {
    const page = await open();
    const release = server.hold(`${run}-slow`);
    const key = await send(page, 'slow');
    await eventually(async () => server.requests(key) === 1, WAIT_MS);
    await page.reload();
    await page.waitForFunction(() => window.ready);
    // The reloaded page sends the stored intent again, with its key, while the first request still runs (409).
    await eventually(async () => server.requests(key) >= 2, WAIT_MS);
    release();
    expect(await settled(page, key)).toMatchObject({ state: 'succeeded', response: { status: 201 } });
    expect(await effectsOfRun()).toEqual([{ key, label: `${run}-slow` }]);
  });

  it('two tabs: each intent is sent once, by one of them', async () => {
    const [a, b] = [await open(), await open()];
    const release = server.hold(`${run}-a1`);
    const keys = [await send(a, 'a1'), await send(b, 'b1'), await send(a, 'a2'), await send(b, 'b2')];
    await eventually(async () => server.requests(keys[0]!) >= 1, WAIT_MS);
    release();
    for (const key of keys) expect((await settled(b, key)).state).toBe('succeeded');
    expect(keys.map((k) => server.requests(k))).toEqual([1, 1, 1, 1]);
    expect((await effectsOfRun()).map((e) => e.label)).toEqual(
      ['a1', 'b1', 'a2', 'b2'].map((l) => `${run}-${l}`),
    );
  });

  it('a double click with a dedupe key is one intent and one effect', async () => {
    const page = await open();
    await page.dblclick('#order');
    await until(page, async () => (await window.queue.list()).some((i) => i.state === 'succeeded'));
    const intents = await page.evaluate(() => window.queue.list());
    expect(intents).toHaveLength(1);
    expect(server.requests(intents[0]!.key)).toBe(1);
    expect((await server.effects()).filter((e) => e.key === intents[0]!.key)).toHaveLength(1);
  });

  it('two tabs enqueueing the same dedupe keys at the same instant: one intent and one effect per key', async () => {
    const [a, b, starter] = [await open(), await open(), await open()];
    const labels = Array.from({ length: 25 }, (_, i) => `${run}-race${i}`);
    // Both tabs wait for one BroadcastChannel message, then enqueue every label with itself as the dedupe key.
    const arm = (page: Page) =>
      page.evaluate((ls) => {
        (window as unknown as { raced: Promise<string[]> }).raced = new Promise((resolve) => {
          const go = new BroadcastChannel('race');
          go.onmessage = () =>
            resolve(Promise.all(ls.map((l) => window.send(l, { dedupeKey: l }))).finally(() => go.close()));
        });
      }, labels);
    await arm(a);
    await arm(b);
    await starter.evaluate(() => new BroadcastChannel('race').postMessage('go'));
    const raced = (page: Page) =>
      page.evaluate(() => (window as unknown as { raced: Promise<string[]> }).raced);
    const [keysA, keysB] = [await raced(a), await raced(b)];
    expect(keysB).toEqual(keysA);
    for (const key of keysA) expect((await settled(a, key)).state).toBe('succeeded');
    const stored = (await a.evaluate(() => window.queue.list())).filter((i) => i.dedupeKey?.startsWith(run));
    expect(stored.map((i) => i.key).sort()).toEqual([...keysA].sort());
    expect((await effectsOfRun()).map((e) => e.label).sort()).toEqual([...labels].sort());
  });

  it('without Web Locks (the storage lease): two tabs, each intent is sent once, by one of them', async () => {
    await browser.context.addInitScript(() => {
      delete (Navigator.prototype as { locks?: unknown }).locks;
    });
    const [a, b] = [await open(), await open()];
    expect(await a.evaluate(() => 'locks' in navigator)).toBe(false);
    const release = server.hold(`${run}-a1`);
    const keys = [await send(a, 'a1'), await send(b, 'b1'), await send(a, 'a2'), await send(b, 'b2')];
    await eventually(async () => server.requests(keys[0]!) >= 1, WAIT_MS);
    release();
    for (const key of keys) expect((await settled(b, key)).state).toBe('succeeded');
    expect(keys.map((k) => server.requests(k))).toEqual([1, 1, 1, 1]);
    expect((await effectsOfRun()).map((e) => e.label)).toEqual(
      ['a1', 'b1', 'a2', 'b2'].map((l) => `${run}-${l}`),
    );
  });

  it('a 422 for a reused key is surfaced as key-reused and not retried', async () => {
    const page = await open();
    const key = await send(page, 'original');
    expect((await settled(page, key)).state).toBe('succeeded');
    // A client bug: the same key stored with another body (what a buggy migration of stored intents would do).
    await page.evaluate(async (k) => {
      const storage = window.client.indexedDbStorage('test-intents');
      const [original] = (await storage.list()).filter((i) => i.key === k);
      await storage.put({ ...original!, body: '{"label":"changed"}', state: 'pending', response: undefined });
      await window.queue.flush();
    }, key);
    const failed = await settled(page, key);
    expect(failed).toMatchObject({ state: 'failed', failure: 'key-reused', response: { status: 422 } });
    await page.evaluate(() => window.queue.flush());
    expect(server.requests(key)).toBe(2);
    expect(await effectsOfRun()).toEqual([{ key, label: `${run}-original` }]);
  });

  it('an intent first sent longer ago than the retention is surfaced as expired, not sent again', async () => {
    const page = await open();
    server.unavailable(`${run}-late`);
    const key = await send(page, 'late');
    await until(page, async (k) => (await window.stateOf(k))?.lastError === 'HTTP 503', key);
    // The page's clock moves past the queue's retention (1 h here), the app flushes: nothing is sent.
    await page.evaluate(() => ((window.skew = 2 * 3_600_000), window.queue.flush()));
    expect(await settled(page, key)).toMatchObject({ state: 'failed', failure: 'expired' });
    expect(server.requests(key)).toBe(1);
    expect(await effectsOfRun()).toEqual([]);
  });
});
