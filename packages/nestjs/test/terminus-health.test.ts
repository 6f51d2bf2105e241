// The inbox as a @nestjs/terminus health indicator, in a real Nest application on real Postgres: up while the
// store answers and every transport runs; down (503) with the store's error when the database is unreachable,
// and with the transport's state when a transport strategy is not running.

import 'reflect-metadata';
import { Controller, Get, Inject, Module } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { kyselySeam, type SqlSeam } from '@inboxkit/core/postgres';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Inboxkit, InboxkitModule } from '../src/index.js';
import { InboxkitHealthIndicator } from '../src/terminus/index.js';
import { openNestTestDatabase, type NestTestDatabase } from './support/nest-database.js';

let database: NestTestDatabase;
beforeAll(async () => {
  database = await openNestTestDatabase('nest_health');
});
afterAll(async () => {
  await database?.close();
});

@Controller('health')
class HealthController {
  constructor(
    @Inject(HealthCheckService) private readonly health: HealthCheckService,
    @Inject(InboxkitHealthIndicator) private readonly inbox: InboxkitHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check(): Promise<unknown> {
    return this.health.check([() => this.inbox.isHealthy()]);
  }
}

async function boot(seam: SqlSeam<unknown>): Promise<{ app: INestApplication; url: string }> {
  @Module({
    imports: [TerminusModule, InboxkitModule.forRoot({ seam, inbox: { schema: database.schema } })],
    controllers: [HealthController],
    providers: [InboxkitHealthIndicator],
  })
  class AppModule {}
  const app = await NestFactory.create(AppModule, new ExpressAdapter(), { logger: false });
  await app.listen(0, '127.0.0.1');
  return { app, url: (await app.getUrl()).replace('[::1]', '127.0.0.1') };
}

describe('InboxkitHealthIndicator (@nestjs/terminus)', () => {
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('is up while the store answers and every registered transport runs', async () => {
    let url: string;
    ({ app, url } = await boot(kyselySeam(database.db)));
    app.get(Inboxkit).registerTransport(() => ({ state: 'running', consumers: ['orders'] }));
    const response = await fetch(`${url}/health`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { status: string; info: Record<string, unknown> };
    expect(body.status).toBe('ok');
    expect(body.info['inboxkit']).toEqual({
      status: 'up',
      store: 'reachable',
      transports: [{ state: 'running', consumers: ['orders'] }],
    });
  });

  it('is down (503) with the state of a transport that is not running', async () => {
    let url: string;
    ({ app, url } = await boot(kyselySeam(database.db)));
    app.get(Inboxkit).registerTransport(() => ({ state: 'stopped', consumers: ['orders'] }));
    const response = await fetch(`${url}/health`);
    expect(response.status).toBe(503);
    const body = (await response.json()) as { status: string; error: Record<string, unknown> };
    expect(body.status).toBe('error');
    expect(body.error['inboxkit']).toMatchObject({
      status: 'down',
      store: 'reachable',
      transports: [{ state: 'stopped', consumers: ['orders'] }],
    });
  });

  it('is down (503) with the store’s error when the database does not answer', async () => {
    const gone: SqlSeam<unknown> = {
      query: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:9')),
      transaction: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:9')),
    };
    let url: string;
    ({ app, url } = await boot(gone));
    const response = await fetch(`${url}/health`);
    expect(response.status).toBe(503);
    const body = (await response.json()) as { error: Record<string, unknown> };
    expect(body.error['inboxkit']).toMatchObject({
      status: 'down',
      store: 'unreachable',
      error: 'connect ECONNREFUSED 127.0.0.1:9',
    });
  });
});
