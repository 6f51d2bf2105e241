// A TransportHarness that runs every consumer of the conformance suite through a Nest microservice: the
// suite's consumer configuration (store, name, attempts, backoff …) becomes an InboxkitTransport binding, its
// handler the body of an @EventPattern method on a Nest controller, and the broker consumer is the inner
// harness' own (so its crash() still drops the connections of a "dead process").

import 'reflect-metadata';
import { Controller, Module, type INestMicroservice } from '@nestjs/common';
import { APP_INTERCEPTOR, NestFactory } from '@nestjs/core';
import { EventPattern } from '@nestjs/microservices';
import { idempotentConsumer, type IdempotentConsumer, type TransportConsumer } from '@inboxkit/core';
import type { TransportHarness } from '@inboxkit/testing';
import { InboxHandlerErrorInterceptor, type Inboxkit } from '../../src/index.js';
import { InboxContext, InboxCtx, InboxkitTransport } from '../../src/transport/index.js';

let patterns = 0;

/** Wraps `inner` so that each `startConsumer` boots a Nest microservice running the consumer's handler. */
export async function nestTransportHarness(inner: TransportHarness): Promise<TransportHarness> {
  return {
    ...inner,
    publish: (messages) => inner.publish(messages),
    readDeadLetters: (count, timeoutMs) => inner.readDeadLetters(count, timeoutMs),
    crash: () => inner.crash(),
    dispose: () => inner.dispose(),
    async startConsumer(suiteConsumer, options) {
      const pattern = `conformance.${++patterns}`;
      const run = suiteConsumer.config.handler;

      @Controller()
      class ConformanceController {
        @EventPattern<string>(pattern)
        handle(@InboxCtx() ctx: InboxContext): Promise<void> {
          return run(ctx.message, ctx.handlerContext);
        }
      }

      @Module({
        controllers: [ConformanceController],
        providers: [{ provide: APP_INTERCEPTOR, useClass: InboxHandlerErrorInterceptor }],
      })
      class ConformanceModule {}

      // The suite's own store and settings; only the handler goes through Nest.
      const inboxkit = {
        consumer: (config: { handler: IdempotentConsumer['config']['handler'] }) =>
          idempotentConsumer({ ...suiteConsumer.config, handler: config.handler }),
        registerTransport: () => () => undefined,
      } as unknown as Inboxkit;
      let started: TransportConsumer | undefined;
      const strategy = new InboxkitTransport({
        inboxkit,
        consumers: [
          {
            pattern,
            transport: (consumer) => ({
              start: async () => {
                started = await inner.startConsumer(
                  consumer as IdempotentConsumer<unknown, unknown>,
                  options,
                );
              },
              stop: async () => started?.stop(),
            }),
          },
        ],
      });
      const app: INestMicroservice = await NestFactory.createMicroservice(ConformanceModule, {
        strategy,
        logger: false,
      });
      await app.listen();
      return { start: async () => undefined, stop: () => app.close() };
    },
  };
}
