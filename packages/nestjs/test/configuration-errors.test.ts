// What a misconfigured Nest application gets: a ConfigurationError that names the fix, at start-up, before
// any request or message is taken.

import 'reflect-metadata';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventPattern, MessagePattern } from '@nestjs/microservices';
import { ConfigurationError, type TransportConsumer } from '@inboxkit/core';
import type { SqlSeam } from '@inboxkit/core/postgres';
import { describe, expect, it } from 'vitest';
import { Idempotent, Inboxkit, InboxkitModule } from '../src/index.js';
import { InboxkitTransport } from '../src/transport/index.js';

/** A seam that is never reached: start-up must fail before any statement. */
const unreachable: SqlSeam<unknown> = {
  query: () => Promise.reject(new Error('not reached')),
  transaction: () => Promise.reject(new Error('not reached')),
};

@Controller()
class RoutesController {
  @Post('pay')
  @Idempotent()
  pay(@Body() body: unknown): unknown {
    return body;
  }
}

@Controller()
class EventsController {
  @EventPattern<string>('known')
  known(): void {}

  @MessagePattern('request')
  request(): string {
    return 'answer';
  }
}

const idle = (): TransportConsumer => ({ start: async () => undefined, stop: async () => undefined });

describe('configuration errors', () => {
  it('refuses InboxkitModule without a seam', () => {
    expect(() => new Inboxkit({} as never)).toThrow(ConfigurationError);
    expect(() => new Inboxkit({} as never)).toThrow(/`seam` is required/);
  });

  it('fails the start of an application with an @Idempotent() route and no idempotency option', async () => {
    @Module({ imports: [InboxkitModule.forRoot({ seam: unreachable })], controllers: [RoutesController] })
    class AppModule {}
    await expect(NestFactory.create(AppModule, { logger: false, abortOnError: false })).rejects.toThrow(
      /`idempotency` option/,
    );
  });

  it('fails the transport start for a pattern no @EventPattern handler has, and for a @MessagePattern', async () => {
    @Module({ imports: [InboxkitModule.forRoot({ seam: unreachable })], controllers: [EventsController] })
    class AppModule {}
    for (const [pattern, message] of [
      ['unknown', /no @EventPattern\('unknown'\) handler/],
      ['request', /is a @MessagePattern/],
    ] as const) {
      const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
      app.connectMicroservice({
        strategy: new InboxkitTransport({
          inboxkit: app.get(Inboxkit),
          consumers: [{ pattern, transport: idle }],
        }),
      });
      await expect(app.startAllMicroservices()).rejects.toThrow(message);
      await app.close();
    }
  });

  it('refuses a transport without bindings', () => {
    expect(() => new InboxkitTransport({ inboxkit: () => undefined as never, consumers: [] })).toThrow(
      ConfigurationError,
    );
  });
});
