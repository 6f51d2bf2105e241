// The offline-checkout example's server: the page, the client bundled from @inboxkit/client, and the orders API
// behind @inboxkit/http's Idempotency-Key middleware on Postgres. One order per key, whatever the page resends.

import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { sql, type Generated, type Kysely } from 'kysely';
import { idempotencyKeys, migrateIdempotencyKeys } from '@inboxkit/http';
import { idempotentNodeHandler } from '@inboxkit/http/node';

export interface CheckoutDatabase {
  orders: { id: Generated<string>; item: string; quantity: number; created_at: Generated<Date> };
}

export interface CheckoutServer {
  readonly url: string;
  stop(): Promise<void>;
}

const PUBLIC = new URL('./public/', import.meta.url);

/** The orders table and the idempotency-key table, in `schema`. */
export async function migrateCheckout(db: Kysely<CheckoutDatabase>, schema: string): Promise<void> {
  await migrateIdempotencyKeys(db, { schema });
  await sql
    .raw(
      `CREATE TABLE IF NOT EXISTS "${schema}".orders (id bigserial PRIMARY KEY, item text NOT NULL,
       quantity int NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
    )
    .execute(db);
}

/** Serves the page on `port` (0: any free one) of 127.0.0.1 (secure context for Web Crypto and Web Locks). */
export async function startCheckoutServer(options: {
  db: Kysely<CheckoutDatabase>;
  schema: string;
  port?: number;
}): Promise<CheckoutServer> {
  const { db, schema } = options;
  await migrateCheckout(db, schema);
  const bundled = await build({
    stdin: { contents: "export * from '@inboxkit/client';", resolveDir: fileURLToPath(PUBLIC), loader: 'js' },
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    conditions: ['@inboxkit/source'],
    write: false,
    logLevel: 'silent',
  });
  const files: Record<string, [string, string]> = {
    '/': ['text/html; charset=utf-8', await readFile(new URL('index.html', PUBLIC), 'utf8')],
    '/app.js': ['text/javascript', await readFile(new URL('app.js', PUBLIC), 'utf8')],
    '/client.js': ['text/javascript', bundled.outputFiles[0]!.text],
  };
  const keys = idempotencyKeys({ db, schema, principal: () => 'demo-customer' });
  const placeOrder = idempotentNodeHandler(keys, async (_request, body, context) => {
    const { item, quantity } = (body ?? {}) as { item?: unknown; quantity?: unknown };
    if (typeof item !== 'string' || !Number.isInteger(quantity) || (quantity as number) < 1) {
      return { status: 422, body: { error: 'an order needs an item and a quantity of at least 1' } };
    }
    return context.transaction(async (tx) => {
      const order = await tx
        .insertInto('orders')
        .values({ item, quantity: quantity as number })
        .returning('id')
        .executeTakeFirstOrThrow();
      return { status: 201, body: { order: order.id, item, quantity } };
    });
  });
  const server: Server = createServer((request, response) => {
    if (request.url === '/api/orders' && request.method === 'POST') return void placeOrder(request, response);
    if (request.url === '/api/orders') {
      void db
        .selectFrom('orders')
        .selectAll()
        .orderBy('id', 'desc')
        .limit(20)
        .execute()
        .then((rows) =>
          response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(rows)),
        )
        .catch(() => response.writeHead(500).end());
      return;
    }
    const file = files[request.url ?? ''];
    if (!file) return void response.writeHead(404).end('not found');
    response.writeHead(200, { 'content-type': file[0], 'cache-control': 'no-store' }).end(file[1]);
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
