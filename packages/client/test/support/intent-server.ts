// The server side of the browser tests: @inboxkit/http's node:http middleware on a fresh Postgres schema, with an
// `effects` table that has no unique key (a double effect is counted, not prevented), a count of the requests
// each Idempotency-Key brought, and switches a test flips per label: hold the handler until released, destroy
// the connection after the commit (the answer is lost, the effect is not), or answer 503 without an effect.
// It serves the test page and the client bundled by esbuild from the package's source.

import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { Kysely, PostgresDialect, sql, type Generated } from 'kysely';
import { idempotencyKeys, migrateIdempotencyKeys } from '@inboxkit/http';
import { idempotentNodeHandler } from '@inboxkit/http/node';
import { createTestSchema, type TestSchema } from '../../../../test/support/services.js';

interface EffectsDB {
  effects: { seq: Generated<string>; key: string; label: string };
}

export interface IntentServer {
  readonly url: string;
  /** The Postgres schema of the keys and effects, and a connection string whose search_path points at it. */
  readonly schema: string;
  readonly connectionString: string;
  /** The test page and the client bundle it loads, for a test that serves them itself (offline, from a route). */
  readonly assets: { readonly '/': string; readonly '/client.js': string };
  /** Requests that reached the server with this Idempotency-Key. */
  requests(key: string): number;
  /** Every effect, in commit order. */
  effects(): Promise<{ key: string; label: string }[]>;
  /** The next request for `label` waits inside its transaction until the returned function is called. */
  hold(label: string): () => void;
  /** The next request for `label` commits, then its connection is destroyed before the answer. */
  cutAfterCommit(label: string): void;
  /** Requests for `label` are answered 503 with `Retry-After: 60`, no effect. */
  unavailable(label: string): void;
  close(): Promise<void>;
}

export const PAGE = `<!doctype html><meta charset="utf-8"><title>intent queue test</title>
<button id="order">Order</button>
<script type="module">
import * as client from '/client.js';
window.skew = 0;
window.client = client;
window.queue = client.createIntentQueue({
  name: 'test', retentionMs: 3_600_000, baseDelayMs: 200, maxDelayMs: 1000, now: () => Date.now() + window.skew,
});
window.send = (label, extra = {}) => window.queue.enqueue({ url: '/api/ops', body: { label }, ...extra }).then((h) => h.key);
window.stateOf = async (key) => (await window.queue.list()).find((i) => i.key === key);
document.getElementById('order').addEventListener('click', () => void window.send('double-click', { dedupeKey: 'cart-1' }));
window.ready = true;
</script>`;

/** The client's source bundled for the page (ESM, browser). */
export async function clientBundle(): Promise<string> {
  const result = await build({
    entryPoints: [fileURLToPath(new URL('../../src/index.ts', import.meta.url))],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2020',
    write: false,
    logLevel: 'silent',
  });
  return result.outputFiles[0]!.text;
}

export async function startIntentServer(): Promise<IntentServer> {
  const test: TestSchema = await createTestSchema('client_browser', { max: 20 });
  test.pool.on('error', () => undefined);
  const db = new Kysely<EffectsDB>({ dialect: new PostgresDialect({ pool: test.pool }) });
  for (let attempt = 1; ; attempt++) {
    try {
      await migrateIdempotencyKeys(db, { schema: test.schema });
      break;
    } catch (error) {
      // Another file dropping its schema during Kysely's introspection: that file's race, try again.
      if (attempt >= 5 || !/schema "[^"]+" does not exist/.test(String(error))) throw error;
    }
  }
  await sql
    .raw(
      `CREATE TABLE "${test.schema}".effects (seq bigserial PRIMARY KEY, key text NOT NULL, label text NOT NULL)`,
    )
    .execute(db);
  const bundle = await clientBundle();
  const keys = idempotencyKeys({ db, schema: test.schema, principal: () => 'browser', retryAfterSeconds: 1 });
  const counts = new Map<string, number>();
  const held = new Map<string, Promise<void>>();
  const cut = new Set<string>();
  const down = new Set<string>();

  const ops = idempotentNodeHandler(keys, async (request: IncomingMessage, body, context) => {
    const { label } = body as { label: string };
    if (down.has(label))
      return { status: 503, headers: { 'retry-after': '60' }, body: { error: 'unavailable' } };
    const response = await context.transaction(async (tx) => {
      await tx
        .insertInto('effects')
        .values({ key: context.key ?? '', label })
        .execute();
      const wait = held.get(label);
      held.delete(label);
      await wait;
      return { status: 201, body: { label } };
    });
    if (cut.delete(label)) request.socket.destroy();
    return response;
  });

  const server = createServer((request, response) => {
    const key = request.headers['idempotency-key'];
    if (typeof key === 'string') counts.set(key, (counts.get(key) ?? 0) + 1);
    // A connection per request: Chromium resends a request on its own when a reused keep-alive connection dies
    // before the answer, which would hide the client's retry from the lost-answer test.
    response.setHeader('connection', 'close');
    if (request.url === '/api/ops') return void ops(request, response);
    const [type, text] =
      request.url === '/client.js' ? ['text/javascript', bundle] : ['text/html; charset=utf-8', PAGE];
    response.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' }).end(text);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    schema: test.schema,
    connectionString: test.connectionString,
    assets: { '/': PAGE, '/client.js': bundle },
    requests: (key) => counts.get(key) ?? 0,
    effects: () => db.selectFrom('effects').select(['key', 'label']).orderBy('seq').execute(),
    hold(label) {
      let release!: () => void;
      held.set(label, new Promise((resolve) => (release = resolve)));
      return () => release();
    },
    cutAfterCommit: (label) => void cut.add(label),
    unavailable: (label) => void down.add(label),
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await test.cleanup();
    },
  };
}
