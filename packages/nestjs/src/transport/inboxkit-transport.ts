// InboxkitTransport: a Nest custom transport strategy that runs inboxkit's own broker consumers (RabbitMQ, SQS,
// Kafka … through their public factories), so an @EventPattern handler on an ordinary controller runs inside
// the inbox's transaction: claim and effect commit together, the broker is settled only after that is
// durable, failures are retried with backoff and dead-lettered with their reason.

import { Server, type CustomTransportStrategy, type MessageHandler } from '@nestjs/microservices';
import { isObservable, lastValueFrom } from 'rxjs';
import {
  ConfigurationError,
  type IdempotentConsumer,
  type IdempotentConsumerConfig,
  type TransportConsumer,
} from '@inboxkit/core';
import type { Inboxkit, TransportStatus } from '../inboxkit.js';
import { unwrapHandlerFailure } from '../inbox-handler-failure.js';
import { InboxContext } from './inbox-context.js';

/** How one `@EventPattern` is consumed: the consumer's settings and the broker consumer that feeds it. */
export interface InboxConsumerBinding<P = unknown, Tx = unknown> extends Partial<
  Omit<IdempotentConsumerConfig<P, Tx>, 'store' | 'handler' | 'name'>
> {
  /** The pattern of the `@EventPattern()` handler this consumer runs (a string, as given to the decorator). */
  readonly pattern: string;
  /** The consumer's name, which scopes dedupe (the same message id is processed once per name). Default is `pattern`. */
  readonly name?: string;
  /**
   * Makes the broker consumer from the idempotent consumer, with the transport's public factory. The strategy
   * starts it in `listen()` and stops it (draining in-flight messages) in `close()`.
   *
   * @example
   * transport: (handler) => rabbitmqConsumer({ connect: () => amqp.connect(url), queue: 'orders', handler })
   */
  readonly transport: (consumer: IdempotentConsumer<P, Tx>) => TransportConsumer;
}

/** Options of `InboxkitTransport`. */
export interface InboxkitTransportOptions {
  /**
   * The inbox: `app.get(Inboxkit)` of an application that imports `InboxkitModule` (a hybrid application),
   * or a function answering it, called in `listen()` (a microservice created before its module exists).
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any data layer's transaction type
  readonly inboxkit: Inboxkit<any> | (() => Inboxkit<any>);
  /** One binding per `@EventPattern` to consume. At least one. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each binding has its own payload type
  readonly consumers: readonly InboxConsumerBinding<any, any>[];
}

/**
 * A `CustomTransportStrategy` running inboxkit consumers for `@EventPattern()` handlers. The handler gets the
 * decoded (and, with the binding's `schema`, validated) payload as `@Payload()`, the transaction as
 * `@InboxTx()` and the whole `InboxContext` as `@Ctx()` / `@InboxCtx()`. Guards, interceptors, pipes and
 * request-scoped providers run as for any Nest transport. A handler that throws fails the attempt: retried
 * with backoff, dead-lettered after `maxAttempts`, or at once for a `PermanentError` or a payload a pipe
 * refused with a 400/422 (`ValidationPipe`). `close()` (and so `enableShutdownHooks()`) stops fetching and
 * drains the messages in flight.
 *
 * @example
 * const app = await NestFactory.create(AppModule);
 * app.connectMicroservice({ strategy: new InboxkitTransport({ inboxkit: app.get(Inboxkit), consumers: [
 *   { pattern: 'orders.placed', schema: Order, transport: (handler) => rabbitmqConsumer({ connect, queue: 'orders', handler }) },
 * ] }) }, { inheritAppConfig: true });
 * await app.startAllMicroservices();
 */
export class InboxkitTransport extends Server implements CustomTransportStrategy {
  /** Failures are handed to the inboxkit consumer, which classifies and records them: Nest need not log them. */
  override readonly propagatesEventHandlerErrors = true;
  readonly #options: InboxkitTransportOptions;
  #state: TransportStatus['state'] = 'stopped';
  #transports: TransportConsumer[] = [];
  #unregister: (() => void) | undefined;
  #closing: Promise<void> | undefined;
  #warnedSanitized = false;

  /** Throws a `ConfigurationError` without bindings. */
  constructor(options: InboxkitTransportOptions) {
    super();
    if (!Array.isArray(options?.consumers) || options.consumers.length === 0) {
      throw new ConfigurationError(
        'InboxkitTransport: `consumers` needs at least one binding ({ pattern, transport })',
      );
    }
    this.#options = options;
  }

  /** Starts every consumer; calls back with the error when one cannot start (the others are stopped). */
  listen(callback: (error?: unknown) => void): void {
    this.#start().then(
      () => callback(),
      (error: unknown) => callback(error),
    );
  }

  async #start(): Promise<void> {
    const option = this.#options.inboxkit;
    const inboxkit: Inboxkit = typeof option === 'function' ? option() : option;
    const names = this.#options.consumers.map((b) => b.name ?? b.pattern);
    this.#state = 'starting';
    this.#unregister = inboxkit.registerTransport(() => ({ state: this.#state, consumers: names }));
    try {
      this.#transports = this.#options.consumers.map((binding) => this.#bind(inboxkit, binding));
      const started = await Promise.allSettled(this.#transports.map((t) => t.start()));
      const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (failed !== undefined) throw failed.reason;
      this.#state = 'running';
    } catch (error) {
      await Promise.allSettled(this.#transports.map((t) => t.stop()));
      this.#state = 'failed';
      throw error;
    }
  }

  #bind(inboxkit: Inboxkit, binding: InboxConsumerBinding): TransportConsumer {
    const { pattern, name, transport, ...settings } = binding;
    if (typeof pattern !== 'string' || pattern.length === 0 || typeof transport !== 'function') {
      throw new ConfigurationError(
        'InboxkitTransport: every binding needs a string `pattern` and a `transport` function',
      );
    }
    const handler = this.getHandlerByPattern(this.normalizePattern(pattern));
    if (handler === null) {
      throw new ConfigurationError(
        `InboxkitTransport: no @EventPattern('${pattern}') handler was found; is its controller in a module of this application?`,
      );
    }
    if (handler.isEventHandler !== true) {
      throw new ConfigurationError(
        `InboxkitTransport: '${pattern}' is a @MessagePattern (request-response) handler; inbox consumers run @EventPattern handlers`,
      );
    }
    if (handler.next !== undefined) {
      throw new ConfigurationError(
        `InboxkitTransport: more than one @EventPattern('${pattern}') handler: one consumer runs one handler (give each its own pattern)`,
      );
    }
    const consumer = inboxkit.consumer<unknown>({
      ...settings,
      name: name ?? pattern,
      handler: (message, context) => this.#run(handler, new InboxContext(message, context)),
    });
    return transport(consumer);
  }

  async #run(handler: MessageHandler, context: InboxContext): Promise<void> {
    try {
      const result: unknown = await handler(context.message.payload, context);
      if (isObservable(result)) await lastValueFrom(result, { defaultValue: undefined });
    } catch (thrown) {
      const carried = unwrapHandlerFailure(thrown);
      if (carried !== undefined) throw carried.error;
      throw this.#sanitized(thrown);
    }
  }

  /** What Nest's exception layer left of an error that was not carried through (no InboxHandlerErrorInterceptor). */
  #sanitized(thrown: unknown): unknown {
    if (thrown instanceof Error) return thrown;
    if (!this.#warnedSanitized) {
      this.#warnedSanitized = true;
      this.logger.warn(
        'InboxkitTransport: a handler failed and Nest replaced its error; import InboxkitModule (and connect a hybrid ' +
          "application's microservice with { inheritAppConfig: true }) so PermanentError and validation failures are " +
          'dead-lettered at once instead of retried',
      );
    }
    const message = (thrown as { message?: unknown } | undefined)?.message;
    return new Error(`the handler failed: ${typeof message === 'string' ? message : JSON.stringify(thrown)}`);
  }

  /** Stops every consumer: no more fetching, in-flight messages drained and settled (each transport's close timeout). */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      if (this.#state === 'running' || this.#state === 'starting') this.#state = 'stopping';
      await Promise.allSettled(this.#transports.map((t) => t.stop()));
      this.#state = 'stopped';
      this.#unregister?.();
    })();
    return this.#closing;
  }

  /** Not supported: inboxkit consumers report through the module's logger and `hooks.onOutcome`. */
  on(): never {
    throw new ConfigurationError(
      "InboxkitTransport does not emit events: use the consumers' hooks.onOutcome or Inboxkit.health()",
    );
  }

  /** The running broker consumers (`TransportConsumer`s), in binding order. */
  unwrap<T>(): T {
    return this.#transports as T;
  }
}
