// The same small payments API behind node:http, Express and Fastify, for the scope tests: POST /pay, POST
// /payments/:id/refund and POST /v1/pay (an Express router mounted at /v1, a Fastify plugin with prefix /v1).
// Every execution inserts one effect labelled `<adapter>:<key>[:<id>]`, so a second execution is counted.
// Requests go out through node:http with the path exactly as written (fetch would normalize it first).

import { request as httpRequest, type IncomingMessage } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import {
  idempotencyKeys,
  type IdempotencyContext,
  type IdempotentRequest,
  type IdempotentResponseInit,
} from '../../src/index.js';
import { idempotentExpressHandler } from '../../src/express/index.js';
import { idempotentFastifyHandler } from '../../src/fastify/index.js';
import { idempotentNodeHandler } from '../../src/node/index.js';
import type { HttpTestDB, HttpTestDatabase } from './http-test-database.js';
import { listen } from './listen.js';

export type AdapterName = 'node:http' | 'Express' | 'Fastify';

export interface AdapterApp {
  readonly name: AdapterName;
  readonly url: string;
  close(): Promise<void>;
}

/** Who asks, from the framework's request: the test decides (a header, nothing, an empty string…). */
export type PrincipalOf = (headers: Readonly<Record<string, unknown>>) => unknown;

async function effect(
  t: HttpTestDatabase,
  label: string,
  context: IdempotencyContext<HttpTestDB>,
): Promise<IdempotentResponseInit> {
  return context.transaction(async (tx) => {
    const row = await tx.insertInto('effects').values({ label }).returning('seq').executeTakeFirstOrThrow();
    return { status: 201, body: { seq: row.seq, label } };
  });
}

/**
 * Starts the three apps on one database. `fastifyRouter` are Fastify's router options (its defaults refuse
 * `/pay/` with 404; the scope tests also run it with the lenient options most apps set).
 */
export async function startAdapterApps(
  t: HttpTestDatabase,
  principalOf: PrincipalOf,
  options: { readonly fastifyRouter?: Record<string, boolean>; readonly only?: AdapterName } = {},
): Promise<AdapterApp[]> {
  if (options.only === 'Fastify') return [await startFastify(t, principalOf, options.fastifyRouter)];
  const principal = (request: IdempotentRequest<{ headers: Record<string, unknown> }>): string =>
    principalOf(request.native.headers) as string;

  // node:http: the application dispatches itself; every path reaches the same listener.
  const nodeKeys = idempotencyKeys<HttpTestDB, IncomingMessage>({ db: t.db, schema: t.schema, principal });
  const nodeApp = await listen(
    idempotentNodeHandler(nodeKeys, async (request, _body, context) => {
      const id = /^\/+payments\/+(\d+)\/+refund/i.exec(request.url ?? '')?.[1];
      return effect(t, `node:http:${context.key ?? '-'}${id === undefined ? '' : `:${id}`}`, context);
    }),
  );

  const expressKeys = idempotencyKeys<HttpTestDB, Request>({ db: t.db, schema: t.schema, principal });
  const app = express();
  const label = (request: Request, context: IdempotencyContext<HttpTestDB>): string =>
    `Express:${context.key ?? '-'}${request.params.id === undefined ? '' : `:${String(request.params.id)}`}`;
  app.post(
    '/pay',
    express.json(),
    idempotentExpressHandler(expressKeys, (request, context) => effect(t, label(request, context), context)),
  );
  app.post(
    '/payments/:id/refund',
    express.json(),
    idempotentExpressHandler(expressKeys, (request, context) => effect(t, label(request, context), context)),
  );
  const v1 = express.Router();
  v1.post(
    '/pay',
    express.json(),
    idempotentExpressHandler(expressKeys, (request, context) =>
      effect(t, `Express:${context.key ?? '-'}:v1`, context),
    ),
  );
  app.use('/v1', v1);
  app.use((error: Error, _request: Request, response: Response, _next: NextFunction) => {
    response.status(500).json({ error: error.message });
  });
  const expressApp = await listen(app);

  const fastifyApp = await startFastify(t, principalOf, options.fastifyRouter);

  return [
    { name: 'node:http', url: nodeApp.url, close: () => nodeApp.close() },
    { name: 'Express', url: expressApp.url, close: () => expressApp.close() },
    fastifyApp,
  ];
}

async function startFastify(
  t: HttpTestDatabase,
  principalOf: PrincipalOf,
  router: Record<string, boolean> | undefined,
): Promise<AdapterApp> {
  const principal = (request: IdempotentRequest<{ headers: Record<string, unknown> }>): string =>
    principalOf(request.native.headers) as string;
  const fastifyKeys = idempotencyKeys<HttpTestDB, FastifyRequest>({ db: t.db, schema: t.schema, principal });
  const fastify: FastifyInstance = Fastify(router === undefined ? {} : { routerOptions: router });
  const fastifyLabel = (request: FastifyRequest, context: IdempotencyContext<HttpTestDB>): string => {
    const id = (request.params as { id?: string }).id;
    return `Fastify:${context.key ?? '-'}${id === undefined ? '' : `:${id}`}`;
  };
  fastify.post(
    '/pay',
    idempotentFastifyHandler(fastifyKeys, (request, context) =>
      effect(t, fastifyLabel(request, context), context),
    ),
  );
  fastify.post(
    '/payments/:id/refund',
    idempotentFastifyHandler(fastifyKeys, (request, context) =>
      effect(t, fastifyLabel(request, context), context),
    ),
  );
  await fastify.register(
    async (plugin) => {
      plugin.post(
        '/pay',
        idempotentFastifyHandler(fastifyKeys, (_request, context) =>
          effect(t, `Fastify:${context.key ?? '-'}:v1`, context),
        ),
      );
    },
    { prefix: '/v1' },
  );
  const fastifyUrl = await fastify.listen({ port: 0, host: '127.0.0.1' });

  return { name: 'Fastify', url: fastifyUrl, close: () => fastify.close() };
}

export interface RawResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
}

/**
 * POSTs JSON to `path` exactly as written (no URL normalization on the way), on a connection of its own; rejects
 * when the connection breaks before the whole response arrived.
 */
export function postRaw(
  baseUrl: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl);
  const payload = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: hostname,
        port,
        method: 'POST',
        path,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': String(payload.length), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString(),
          }),
        );
        res.on('aborted', () => reject(new Error('response aborted')));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
