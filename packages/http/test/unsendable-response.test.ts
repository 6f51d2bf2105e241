// Responses Node cannot send, and responses the handler wrote itself, behind each adapter: the server (a
// process of its own) keeps answering, nothing unsendable is stored, the effect commits only with a stored
// response, and a retry with the same key gets what the docs promise (docs/http.md, "Responses").

import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openHttpTestDatabase, type HttpTestDatabase } from './support/http-test-database.js';
import { postRaw as post } from './support/adapter-apps.js';
import { startChildServer, type ChildServer } from './support/child-server.js';

const SERVER = fileURLToPath(new URL('./fixtures/response-server.ts', import.meta.url));
const ADAPTERS = ['node:http', 'Express', 'Fastify'] as const;

let t: HttpTestDatabase;
const servers = new Map<string, ChildServer>();

beforeAll(async () => {
  t = await openHttpTestDatabase('http_unsendable');
  for (const adapter of ADAPTERS) {
    servers.set(
      adapter,
      await startChildServer(SERVER, { connectionString: t.connectionString, schema: t.schema, adapter }),
    );
  }
});

afterAll(async () => {
  for (const server of servers.values()) server.kill();
  await t?.close();
});

describe.each(ADAPTERS)('%s', (adapter) => {
  const server = (): ChildServer => servers.get(adapter)!;
  const effects = (key: string): Promise<number> => t.effects(`${adapter}:${key}`);

  /** The server process is alive and still answers a fresh request with its effect. */
  async function expectServing(): Promise<void> {
    const key = randomUUID();
    const answer = await post(server().url, '/ok', {}, { 'idempotency-key': key });
    expect(answer.status).toBe(201);
    expect(await effects(key)).toBe(1);
    expect(server().alive(), server().stderr()).toBe(true);
  }

  it('refuses a header value Node cannot send with a 500 naming it, rolls the effect back and keeps serving', async () => {
    const key = randomUUID();
    const body = { value: '/files/résumé-€.pdf' };
    const first = await post(server().url, '/bad-header', body, { 'idempotency-key': key });
    expect(first.status).toBe(500);
    expect(JSON.parse(first.body)).toMatchObject({ title: 'Invalid response' });
    expect((JSON.parse(first.body) as { detail: string }).detail).toContain('"location"');
    expect(await effects(key)).toBe(0);
    await expectServing();

    // The key was released: the same handler runs again (refused again, not a 409), still without an effect.
    const again = await post(server().url, '/bad-header', body, { 'idempotency-key': key });
    expect(again.status).toBe(500);
    expect(await effects(key)).toBe(0);

    // A corrected handler (percent-encoding the value) then succeeds once with the same key, and is replayed.
    const fixed = await post(server().url, '/bad-header', body, { 'idempotency-key': key, 'x-fix': '1' });
    expect(fixed.status).toBe(201);
    expect(fixed.headers['location']).toBe(encodeURI(body.value));
    const replay = await post(server().url, '/bad-header', body, { 'idempotency-key': key });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toBe(fixed.body);
    expect(replay.headers['location']).toBe(encodeURI(body.value));
    expect(await effects(key)).toBe(1);
    await expectServing();
  });

  it('refuses a header value with CR/LF the same way', async () => {
    const key = randomUUID();
    const body = { value: '/ok\r\nset-cookie: session=stolen' };
    const first = await post(server().url, '/bad-header', body, { 'idempotency-key': key });
    expect(first.status).toBe(500);
    expect((JSON.parse(first.body) as { detail: string }).detail).toContain('"location"');
    expect(first.headers['set-cookie']).toBeUndefined();
    expect(await effects(key)).toBe(0);
    await expectServing();
  });

  it('refuses a Trailer header (Node refuses it with a body of known length) the same way', async () => {
    const key = randomUUID();
    const body = { name: 'Trailer', value: 'x-checksum' };
    const first = await post(server().url, '/bad-header', body, { 'idempotency-key': key });
    expect(first.status).toBe(500);
    expect((JSON.parse(first.body) as { detail: string }).detail).toContain('"Trailer"');
    expect(await effects(key)).toBe(0);
    await expectServing();
  });

  it('replays a stored response whose header Node cannot send (stored before the check) without that header', async () => {
    const key = randomUUID();
    const body = { value: '/files/ok.pdf' };
    const first = await post(server().url, '/bad-header', body, { 'idempotency-key': key });
    expect(first.status).toBe(201);
    // What an earlier version stored for a handler that returned the raw value.
    await sql`UPDATE idempotency_key SET response_headers = jsonb_set(response_headers, '{location}', to_jsonb(${'/files/résumé-€.pdf'}::text))
      WHERE idempotency_key = ${key}`.execute(t.db);
    for (let retry = 0; retry < 2; retry++) {
      const replay = await post(server().url, '/bad-header', body, { 'idempotency-key': key });
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toBe(first.body);
      expect(replay.headers['location']).toBeUndefined();
      await expectServing();
    }
    expect(await effects(key)).toBe(1);
  });

  it('refuses a handler that streamed to the response itself before its commit: cut off, rolled back, key released', async () => {
    const key = randomUUID();
    await expect(
      post(server().url, '/stream-before-commit', {}, { 'idempotency-key': key, 'x-write': '1' }),
    ).rejects.toThrow();
    await expectServing();
    expect(await effects(key)).toBe(0);
    // Released: the same key runs the handler (now returning its response) once, and then replays it.
    const fixed = await post(server().url, '/stream-before-commit', {}, { 'idempotency-key': key });
    expect(fixed.status).toBe(201);
    expect(fixed.headers['idempotent-replayed']).toBeUndefined();
    const replay = await post(server().url, '/stream-before-commit', {}, { 'idempotency-key': key });
    expect(replay.body).toBe(fixed.body);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(await effects(key)).toBe(1);
  });

  it('keeps serving when a handler writes the response itself after its commit; retries replay the stored response', async () => {
    const key = randomUUID();
    const first = await post(server().url, '/write-after-commit', {}, { 'idempotency-key': key });
    // What the handler wrote reaches the client (the commit cannot be taken back) …
    expect(first.status).toBe(201);
    expect(first.body).toBe('written by the handler');
    await expectServing();
    // … and every retry gets the response it returned, which is what was stored with the effect.
    const replay = await post(server().url, '/write-after-commit', {}, { 'idempotency-key': key });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(JSON.parse(replay.body)).toHaveProperty('id');
    expect(await effects(key)).toBe(1);
  });
});
