// The console's server refuses what it must (real Postgres and RabbitMQ behind it): a request without the
// credential gets 401 and changes nothing; a bind beyond loopback needs --allow-remote and a credential; the
// credential is never logged; bad requests get a 4xx that says what is wrong and start nothing.

import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runCli } from '../../src/run-cli.js';
import type { ConsoleServer } from '../../src/console/console-server.js';
import { launchBrowser } from '../support/browser.js';
import { captureIo } from '../support/capture-io.js';
import { consoleWorld } from '../support/console-fixture.js';
import type { ConsoleWorld } from '../support/console-fixture.js';
import { requireService } from '../support/services.js';

const TOKEN = 'console-token-3f9a1c7e5b2d4f60';
const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-inboxkit-console': '1', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

describe('the console server (real Postgres and RabbitMQ)', () => {
  let world: ConsoleWorld;
  let open: ConsoleServer;
  let guarded: ConsoleServer;

  beforeAll(async () => {
    world = await consoleWorld();
    world.refused.add('srv-1');
    world.refused.add('srv-2');
    await world.publish(
      [
        { id: 'srv-1', amountCents: 100 },
        { id: 'srv-2', amountCents: 200 },
      ],
      2,
    );
    open = await world.console();
    guarded = await world.console({ credential: TOKEN });
  }, 120_000);

  afterAll(async () => {
    await world?.dispose();
  });

  it('answers 401 to a request without the credential, or with a wrong one, and changes nothing', async () => {
    world.refused.clear();
    const depth = await world.broker.dlqDepth();
    const rows = await world.database.rows('orders');
    const dlq = `rabbitmq:${world.broker.dlq}`;
    for (const auth of [
      undefined,
      `Bearer ${TOKEN}x`,
      `Basic ${Buffer.from(`alice:${TOKEN.slice(1)}`).toString('base64')}`,
      'Token abc',
    ]) {
      const headers: Record<string, string> = auth === undefined ? {} : { authorization: auth };
      const replay = await post(`${guarded.url}api/replays`, { dlq, ids: ['srv-1', 'srv-2'] }, headers);
      expect(replay.status).toBe(401);
      expect(replay.headers.get('www-authenticate')).toMatch(/^Basic realm="inboxkit console"/);
      expect((await fetch(`${guarded.url}api/overview`, { headers })).status).toBe(401);
      expect((await fetch(guarded.url, { headers })).status).toBe(401);
    }
    expect(await world.broker.dlqDepth()).toBe(depth);
    expect(await world.database.rows('orders')).toEqual(rows);
    expect((await world.database.effects()).size).toBe(0);
    expect(await (await fetch(`${open.url}api/replays`)).json()).toEqual([]);

    // With the credential (basic auth, any user name, or Bearer) it answers, and the user name is the operator.
    const ok = await fetch(`${guarded.url}api/overview`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ok.status).toBe(200);
    const dry = await post(
      `${guarded.url}api/dry-run`,
      { dlq, ids: ['srv-1'] },
      { authorization: `Basic ${Buffer.from(`alice:${TOKEN}`).toString('base64')}` },
    );
    expect(dry.status).toBe(200);
    expect(await dry.json()).toMatchObject({ dryRun: true, requestedBy: 'alice', wouldReplay: 1 });
    expect(world.log.join('\n')).not.toContain(TOKEN);
    expect(world.log.join('\n')).toMatch(/refused POST \/api\/replays: no valid credential/);
  });

  it(
    'serves the page in a browser that gives the credential through the basic-auth prompt',
    { timeout: 600_000 },
    async () => {
      const browser = await launchBrowser({ httpCredentials: { username: 'bob', password: TOKEN } });
      try {
        const page = await browser.context.newPage();
        await page.goto(guarded.url);
        await expect.poll(() => page.locator('#dlq-table tbody tr').count(), { timeout: 20_000 }).toBe(2);
      } finally {
        await browser.close();
      }
      const denied = await launchBrowser({
        httpCredentials: { username: 'bob', password: 'not-the-token-at-all' },
      });
      try {
        const page = await denied.context.newPage();
        const response = await page.goto(guarded.url);
        expect(response?.status()).toBe(401);
      } finally {
        await denied.close();
      }
    },
  );

  it('refuses bad requests with a 4xx saying what is wrong, and starts nothing', async () => {
    const dlq = `rabbitmq:${world.broker.dlq}`;
    const cases: [Response, number, RegExp][] = [
      [await post(`${open.url}api/replays`, '{not json'), 400, /not valid JSON/],
      [await post(`${open.url}api/replays`, [1, 2]), 400, /must be a JSON object/],
      [
        await post(`${open.url}api/replays`, { dlq: 'rabbitmq:nope', ids: ['srv-1'] }),
        400,
        /unknown dlq "rabbitmq:nope"/,
      ],
      [await post(`${open.url}api/replays`, { dlq }), 400, /select dead letters .* or send all: true/],
      [
        await post(`${open.url}api/replays`, { dlq, ids: ['srv-1'], ratePerSecond: -3 }),
        400,
        /ratePerSecond must be a number above 0/,
      ],
      [await post(`${open.url}api/replays`, { dlq, ids: 'srv-1' }), 400, /ids must be a list/],
      [
        await post(`${open.url}api/replays`, { dlq, ids: ['srv-1'], includeParked: 'yes' }),
        400,
        /includeParked must be true or false/,
      ],
      [
        await post(`${open.url}api/replays`, { dlq, ids: ['srv-1'], since: 'yesterday' }),
        400,
        /since must be an ISO 8601 time/,
      ],
      [
        await fetch(`${open.url}api/replays`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ dlq, ids: ['srv-1'] }),
        }),
        403,
        /x-inboxkit-console/,
      ],
      [
        await post(`${open.url}api/replays`, { dlq, ids: ['srv-1'] }, { 'content-type': 'text/plain' }),
        415,
        /application\/json/,
      ],
      [
        await post(`${open.url}api/replays`, { dlq, ids: ['srv-1'] }, { origin: 'http://evil.example' }),
        403,
        /evil\.example/,
      ],
      [await post(`${open.url}api/dead-letters`, { dlq, limit: 0 }), 400, /limit must be/],
      [
        await fetch(`${open.url}api/message?dlq=${encodeURIComponent(dlq)}&position=nowhere`),
        404,
        /list the DLQ again/,
      ],
      [await fetch(`${open.url}api/nothing-here`), 404, /no such page/],
      // Postgres text cannot hold a NUL: an id with one is bad input, not a server error.
      [await fetch(`${open.url}api/message?consumer=orders&id=srv%001`), 400, /id .*NUL/],
      [await fetch(`${open.url}api/message?consumer=ord%00ers&id=srv-1`), 400, /consumer .*NUL/],
      [await post(`${open.url}api/dry-run`, { dlq, ids: ['srv-1\u0000'] }), 400, /ids .*NUL/],
      [
        await post(`${open.url}api/edit`, {
          dlq,
          consumer: 'orders',
          id: 'srv\u00001',
          payload: '{}',
          reason: 'x',
        }),
        400,
        /id .*NUL/,
      ],
    ];
    for (const [response, status, message] of cases) {
      expect(response.status).toBe(status);
      expect(((await response.json()) as { error: string }).error).toMatch(message);
    }
    expect(await (await fetch(`${open.url}api/replays`)).json()).toEqual([]);
    expect(await world.broker.dlqDepth()).toBe(2);
  });

  it('refuses a replay rate slower than a timer can wait (2^31-1 ms between messages), in the console and the CLI, and replays nothing', async () => {
    const dlq = `rabbitmq:${world.broker.dlq}`;
    const replay = await post(`${open.url}api/replays`, {
      dlq,
      ids: ['srv-1', 'srv-2'],
      ratePerSecond: 1e-7,
    });
    expect(replay.status).toBe(400);
    expect(((await replay.json()) as { error: string }).error).toMatch(
      /ratePerSecond 1e-7 .*2147483647 ms.*at least 4\.66e-7/,
    );
    const cli = captureIo({ env: {} });
    const code = await runCli(
      [
        'dlq',
        'replay',
        '--transport',
        'rabbitmq',
        '--from',
        world.broker.dlq,
        '--amqp-url',
        requireService('AMQP_URL'),
        '--database-url',
        requireService('DATABASE_URL'),
        '--schema',
        world.database.schema,
        '--rate',
        '0.0000001',
      ],
      cli.io,
    );
    expect(code).toBe(2);
    expect(cli.stderr()).toMatch(/--rate 0\.0000001 .*2147483647 ms.*at least 4\.66e-7\/s/);
    expect(await (await fetch(`${open.url}api/replays`)).json()).toEqual([]);
    expect(await world.broker.dlqDepth()).toBe(2);
    expect((await world.database.effects()).size).toBe(0);
  });

  // The x-delivery-count of each dead letter (a quorum DLQ counts every receive). Reading them is itself one
  // receive of each, so two readings around nothing differ by exactly 1.
  const deliveryCounts = async (): Promise<Map<string, number>> =>
    new Map(
      (await world.broker.deadLetters()).map((e) => [
        e.id ?? '?',
        Number(e.headers['x-delivery-count'] ?? 0),
      ]),
    );

  it("a page of another local origin cannot make the console read the DLQ: the dead letters' delivery counts do not move", async () => {
    const dlq = encodeURIComponent(`rabbitmq:${world.broker.dlq}`);
    const targets = [
      `${open.url}api/dead-letters?dlq=${dlq}`,
      `${open.url}api/dead-letters?dlq=${dlq}&limit=5`,
      `${open.url}api/overview`,
    ];
    // Another local web server (another port: the same site, another origin) whose page embeds the console.
    const attacker = createServer((_, response) => {
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end(
        `<!doctype html><body>${targets.map((t) => `<img src="${t}">`).join('')}<script>
          const answered = new Set(); for (const img of document.images) {
            const done = () => { answered.add(img); document.title = String(answered.size); };
            img.onload = done; img.onerror = done; if (img.complete) done(); }
        </script></body>`,
      );
    });
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    const before = await deliveryCounts();
    expect([...before.keys()].sort()).toEqual(['srv-1', 'srv-2']);
    const browser = await launchBrowser();
    try {
      const page = await browser.context.newPage();
      await page.goto(`http://127.0.0.1:${(attacker.address() as AddressInfo).port}/`);
      // Every <img> answered (loaded or failed): whatever the console did for them is done. Each image counts
      // once: one already complete when the script runs may still fire its error event afterwards (CI: '6').
      await expect.poll(() => page.title(), { timeout: 20_000 }).toBe(String(targets.length));
    } finally {
      await browser.close();
      attacker.close();
    }
    const after = await deliveryCounts();
    for (const [id, count] of before) expect(after.get(id), id).toBe(count + 1);
  });

  it('listing is a POST with the console header; every request from another site or origin is refused', async () => {
    const dlq = `rabbitmq:${world.broker.dlq}`;
    const get = await fetch(`${open.url}api/dead-letters?dlq=${encodeURIComponent(dlq)}`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect(((await get.json()) as { error: string }).error).toMatch(/POST/);
    const listed = await post(`${open.url}api/dead-letters`, { dlq });
    expect(listed.status).toBe(200);
    expect(((await listed.json()) as { entries: { id: string }[] }).entries.map((e) => e.id).sort()).toEqual([
      'srv-1',
      'srv-2',
    ]);
    const noHeader = await fetch(`${open.url}api/dead-letters`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ dlq }),
    });
    expect(noHeader.status).toBe(403);
    for (const site of ['cross-site', 'same-site']) {
      for (const path of ['api/overview', 'api/replays', 'console.js']) {
        const refused = await fetch(`${open.url}${path}`, { headers: { 'sec-fetch-site': site } });
        expect(refused.status, `${site} ${path}`).toBe(403);
      }
      const listing = await post(`${open.url}api/dead-letters`, { dlq }, { 'sec-fetch-site': site });
      expect(listing.status).toBe(403);
    }
    const otherOrigin = await fetch(`${open.url}api/overview`, {
      headers: { origin: 'http://127.0.0.1:1' },
    });
    expect(otherOrigin.status).toBe(403);
    expect(((await otherOrigin.json()) as { error: string }).error).toMatch(/127\.0\.0\.1:1/);
    // The page itself, as a browser asks for it (typed, or followed from a link), and its own requests.
    expect((await fetch(open.url, { headers: { 'sec-fetch-site': 'none' } })).status).toBe(200);
    // fetch() sets sec-fetch-mode itself: the navigation as a browser sends it, through node:http.
    const navigation = await new Promise<number>((resolve, reject) => {
      httpRequest(
        open.url,
        {
          headers: {
            'sec-fetch-site': 'cross-site',
            'sec-fetch-mode': 'navigate',
            'sec-fetch-dest': 'document',
          },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      )
        .on('error', reject)
        .end();
    });
    expect(navigation).toBe(200);
    expect(
      (await fetch(`${open.url}api/overview`, { headers: { 'sec-fetch-site': 'same-origin' } })).status,
    ).toBe(200);
  });

  it('answers only to its own host names on loopback (no DNS rebinding)', async () => {
    const { port } = new URL(open.url);
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      request(
        { host: '127.0.0.1', port, path: '/api/overview', headers: { host: `attacker.example:${port}` } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      )
        .on('error', reject)
        .end();
    });
    expect(status).toBe(421);
  });

  it('`inboxkit console` will not bind beyond loopback without --allow-remote and a credential, nor print the credential', async () => {
    const base = [
      'console',
      '--database-url',
      requireService('DATABASE_URL'),
      '--schema',
      world.database.schema,
      '--port',
      '0',
    ];
    const noFlag = captureIo({ env: {} });
    expect(await runCli([...base, '--bind', '0.0.0.0'], noFlag.io)).toBe(3);
    expect(noFlag.stderr()).toMatch(/binds 0\.0\.0\.0.*pass --allow-remote and set a credential/);

    const noCredential = captureIo({ env: {} });
    expect(await runCli([...base, '--bind', '0.0.0.0', '--allow-remote'], noCredential.io)).toBe(3);
    expect(noCredential.stderr()).toMatch(
      /without a credential: set INBOXKIT_CONSOLE_TOKEN or pass --token-file/,
    );

    for (const weak of ['aaaaaaaaaaaaaaaa', 'abcdefghijklmnopq', 'abcabcabcabcabcabc', '0000111100001111']) {
      const refused = captureIo({ env: { INBOXKIT_CONSOLE_TOKEN: weak } });
      expect(await runCli([...base, '--bind', '0.0.0.0', '--allow-remote'], refused.io), weak).toBe(3);
      expect(refused.stderr()).toMatch(/the console credential is too easy to guess: .*openssl rand -hex 24/);
      expect(refused.stderr() + refused.stdout()).not.toContain(weak);
    }
    const short = captureIo({ env: { INBOXKIT_CONSOLE_TOKEN: 'short-secret' } });
    expect(await runCli([...base, '--bind', '0.0.0.0', '--allow-remote'], short.io)).toBe(3);
    expect(short.stderr()).toMatch(/shorter than 16 characters/);
    expect(short.stderr() + short.stdout()).not.toContain('short-secret');

    // Bound, serving, stopped by the signal: the credential appears nowhere in the output.
    const controller = new AbortController();
    const served = captureIo({ env: { INBOXKIT_CONSOLE_TOKEN: TOKEN }, signal: controller.signal });
    const run = runCli(
      [
        ...base,
        '--bind',
        '0.0.0.0',
        '--allow-remote',
        '--dlq',
        `rabbitmq:${world.broker.dlq}`,
        '--amqp-url',
        requireService('AMQP_URL'),
      ],
      served.io,
    );
    let url: string | undefined;
    for (let i = 0; i < 200 && url === undefined; i += 1) {
      url = /inboxkit console: (\S+)/.exec(served.stdout())?.[1];
      if (url === undefined) await new Promise((r) => setTimeout(r, 50));
    }
    expect(url).toMatch(/^http:\/\/0\.0\.0\.0:\d+\/$/);
    const local = url!.replace('0.0.0.0', '127.0.0.1');
    expect((await fetch(`${local}api/overview`)).status).toBe(401);
    expect(
      (await fetch(`${local}api/overview`, { headers: { authorization: `Bearer ${TOKEN}` } })).status,
    ).toBe(200);
    controller.abort();
    expect(await run).toBe(0);
    expect(served.stdout() + served.stderr()).not.toContain(TOKEN);

    const badDlq = captureIo({ env: {} });
    expect(await runCli(['console', '--dlq', 'rabbit:orders.dlq'], badDlq.io)).toBe(2);
    expect(badDlq.stderr()).toMatch(/--dlq takes TRANSPORT:DLQ/);
  });
});
