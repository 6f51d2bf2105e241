// The context one handler run receives. The abort signal (and its timer) and the downstream key are made on
// first use: most transactional handlers never read them, and a timer per message is not free.

import { performance } from 'node:perf_hooks';
import type { HandlerContext, HandlerOutbox, Logger, OutboxBinder } from './consumer-types.js';
import { downstreamKey, downstreamStepKey } from './downstream-key.js';
import { ConfigurationError, HandlerTimeoutError } from './errors.js';

export class HandlerRun<Tx> implements HandlerContext<Tx> {
  readonly tx: Tx;
  readonly attempt: number;
  readonly consumer: string;
  readonly isReplay: boolean;
  readonly logger: Logger;
  readonly #messageId: string;
  readonly #timeoutMs: number;
  readonly #bindOutbox: OutboxBinder<Tx> | undefined;
  #outbox: HandlerOutbox | undefined;
  readonly #started = performance.now();
  #controller: AbortController | undefined;
  #timer: NodeJS.Timeout | undefined;
  #key: string | undefined;
  #finished = false;

  constructor(init: {
    tx: Tx;
    attempt: number;
    consumer: string;
    messageId: string;
    isReplay: boolean;
    logger: Logger;
    timeoutMs: number;
    outbox?: OutboxBinder<Tx> | undefined;
  }) {
    this.tx = init.tx;
    this.attempt = init.attempt;
    this.consumer = init.consumer;
    this.isReplay = init.isReplay;
    this.logger = init.logger;
    this.#messageId = init.messageId;
    this.#timeoutMs = init.timeoutMs;
    this.#bindOutbox = init.outbox;
  }

  get outbox(): HandlerOutbox {
    if (this.#outbox === undefined) {
      if (this.#bindOutbox === undefined) {
        throw new ConfigurationError(
          `context.outbox was used by consumer ${JSON.stringify(this.consumer)}, which has no outbox: pass outbox: transactionalOutbox() (from @inboxkit/outbox) to idempotentConsumer()`,
        );
      }
      this.#outbox = this.#bindOutbox(this.tx, { consumer: this.consumer, messageId: this.#messageId, attempt: this.attempt });
    }
    return this.#outbox;
  }

  get downstreamKey(): string {
    this.#key ??= downstreamKey(this.consumer, this.#messageId);
    return this.#key;
  }

  /** An own arrow property, so `{ downstreamKeyFor }` destructured from the context still works. */
  readonly downstreamKeyFor = (step: string): string => downstreamStepKey(this.consumer, this.#messageId, step);

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      const controller = new AbortController();
      this.#controller = controller;
      const remaining = this.#timeoutMs - this.elapsedMs;
      const abort = (): void =>
        controller.abort(new HandlerTimeoutError(`the handler ran longer than handlerTimeoutMs (${this.#timeoutMs} ms)`));
      if (remaining <= 0) abort();
      else if (!this.#finished) {
        this.#timer = setTimeout(abort, remaining);
        this.#timer.unref();
      }
    }
    return this.#controller.signal;
  }

  get elapsedMs(): number {
    return performance.now() - this.#started;
  }

  /** True once the handler timeout has passed (whether or not the handler read its signal). */
  get timedOut(): boolean {
    return this.#controller?.signal.aborted === true || this.elapsedMs >= this.#timeoutMs;
  }

  /** Stops the timer; the signal stays as it is. */
  finish(): void {
    this.#finished = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
  }
}
