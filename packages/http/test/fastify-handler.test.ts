// The Fastify adapter passes the adapter contract against a real server and real Postgres.

import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { afterAll, beforeAll } from 'vitest';
import { idempotencyKeys } from '../src/index.js';
import { idempotentFastifyHandler } from '../src/fastify/index.js';
import {
  adapterContract,
  paymentRoute,
  principalHeader,
  type PaymentBody,
} from './support/adapter-contract.js';
import { openHttpTestDatabase, type HttpTestDatabase } from './support/http-test-database.js';

let t: HttpTestDatabase;
let app: FastifyInstance;
let url: string;

beforeAll(async () => {
  t = await openHttpTestDatabase('http_fastify');
  const keys = idempotencyKeys({
    db: t.db,
    schema: t.schema,
    principal: (request: { native: FastifyRequest }) => principalHeader(request.native.headers),
  });
  const route = paymentRoute();
  app = Fastify();
  app.post(
    '/payments',
    idempotentFastifyHandler(keys, (request, context) =>
      route(principalHeader(request.headers), request.body as PaymentBody, context),
    ),
  );
  url = await app.listen({ port: 0, host: '127.0.0.1' });
});

afterAll(async () => {
  await app?.close();
  await t?.close();
});

adapterContract(
  'Fastify',
  () => url,
  () => t,
);
