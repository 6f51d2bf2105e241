// The Express adapter passes the adapter contract against a real server and real Postgres.

import express, { type NextFunction, type Request, type Response } from 'express';
import { createServer } from 'node:http';
import { afterAll, beforeAll } from 'vitest';
import { idempotencyKeys } from '../src/index.js';
import { idempotentExpressHandler } from '../src/express/index.js';
import {
  adapterContract,
  paymentRoute,
  principalHeader,
  type PaymentBody,
} from './support/adapter-contract.js';
import { openHttpTestDatabase, type HttpTestDatabase } from './support/http-test-database.js';
import { listen } from './support/listen.js';

let t: HttpTestDatabase;
let server: { url: string; close(): Promise<void> };

beforeAll(async () => {
  t = await openHttpTestDatabase('http_express');
  const keys = idempotencyKeys({
    db: t.db,
    schema: t.schema,
    principal: (request: { native: Request }) => principalHeader(request.native.headers),
  });
  const route = paymentRoute();
  const app = express();
  app.post(
    '/payments',
    express.json(),
    idempotentExpressHandler(keys, (request, context) =>
      route(principalHeader(request.headers), request.body as PaymentBody, context),
    ),
  );
  app.use((error: Error, _request: Request, response: Response, _next: NextFunction) => {
    response.status(500).json({ error: error.message });
  });
  server = await listen(createServer(app));
});

afterAll(async () => {
  await server?.close();
  await t?.close();
});

adapterContract(
  'Express',
  () => server.url,
  () => t,
);
