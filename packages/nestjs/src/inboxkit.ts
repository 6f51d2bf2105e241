// Inboxkit: what InboxkitModule provides. One inbox store over the application's data layer seam, consumers
// made with the module's defaults, the Idempotency-Key protocol of @Idempotent() routes, and the health of both.

import {
  ConfigurationError,
  idempotentConsumer,
  type IdempotentConsumer,
  type IdempotentConsumerConfig,
  type Logger,
} from '@inboxkit/core';
import { PostgresInboxStore, type SqlSeam } from '@inboxkit/core/postgres';
import { idempotencyKeys, type IdempotencyKeys, type IdempotencyKeysConfig } from '@inboxkit/http';
import type { ConsumerDefaults, InboxkitModuleOptions } from './inboxkit-module-options.js';
import { nestLogger } from './nest-logger.js';

/** Per-route settings that change the Idempotency-Key protocol itself (see `@Idempotent()`). */
export type RouteKeyOverrides = Partial<Pick<IdempotencyKeysConfig<unknown, unknown>, 'key' | 'fingerprint'>>;

/** The state of one transport strategy, for the health check. */
export interface TransportStatus {
  /** `starting` until every consumer subscribed, `running`, then `stopping` and `stopped`. */
  readonly state: 'starting' | 'running' | 'stopping' | 'stopped' | 'failed';
  /** The consumers it runs, by name. */
  readonly consumers: readonly string[];
}

/** What `Inboxkit.health()` reports. */
export interface InboxkitHealth {
  /** True when the store answered and every registered transport is running. */
  readonly healthy: boolean;
  /** Whether `SELECT 1` through the seam succeeded; the error's message otherwise. */
  readonly store: { readonly reachable: boolean; readonly error?: string };
  readonly transports: readonly TransportStatus[];
}

/**
 * The inbox of a Nest application, made by `InboxkitModule` (inject it by its class) or directly for a
 * microservice created before any module (`new Inboxkit(options)`).
 *
 * @example
 * constructor(@Inject(Inboxkit) private readonly inboxkit: Inboxkit) {}
 */
export class Inboxkit<Tx = unknown> {
  /** The store over `options.seam`. */
  readonly store: PostgresInboxStore<unknown, Tx>;
  readonly seam: SqlSeam<Tx>;
  readonly logger: Logger;
  readonly options: InboxkitModuleOptions<Tx>;
  readonly #keys = new Map<string, IdempotencyKeys<unknown, unknown, Tx>>();
  readonly #overrideKeys = new WeakMap<RouteKeyOverrides, IdempotencyKeys<unknown, unknown, Tx>>();
  readonly #transports = new Set<() => TransportStatus>();

  /** Throws a `ConfigurationError` when `options.seam` is missing or the idempotency options are invalid. */
  constructor(options: InboxkitModuleOptions<Tx>) {
    if (typeof options?.seam?.transaction !== 'function' || typeof options.seam.query !== 'function') {
      throw new ConfigurationError(
        'InboxkitModule: `seam` is required: the seam of your data layer (pgSeam(pool), prismaSeam(prisma), typeormSeam(dataSource) … from @inboxkit/data, or kyselySeam(db))',
      );
    }
    this.options = Object.freeze({ ...options });
    this.seam = options.seam;
    this.logger = options.logger ?? nestLogger();
    this.store = new PostgresInboxStore<unknown, Tx>({ ...options.inbox, seam: options.seam });
    // Checked now, so a bad `idempotency` option fails the application's start, not its first request.
    if (options.idempotency !== undefined) this.idempotencyKeys();
  }

  /** The consumer defaults of the module (`consumerDefaults`). */
  get consumerDefaults(): ConsumerDefaults {
    return this.options.consumerDefaults ?? {};
  }

  /**
   * An idempotent consumer on this inbox: the module's `consumerDefaults`, logger and meter provider under
   * `config`. Throws a `ConfigurationError` for bad options.
   *
   * @example
   * const consumer = inboxkit.consumer({ name: 'billing', handler: async (m, { tx }) => charge(tx, m.payload) });
   */
  consumer<P>(config: Omit<IdempotentConsumerConfig<P, Tx>, 'store'>): IdempotentConsumer<P, Tx> {
    return idempotentConsumer<P, Tx>({
      ...(this.consumerDefaults as Partial<IdempotentConsumerConfig<P, Tx>>),
      logger: this.logger,
      ...(this.options.meterProvider === undefined ? {} : { meterProvider: this.options.meterProvider }),
      ...config,
      store: this.store,
    });
  }

  /**
   * The Idempotency-Key protocol of the module's `idempotency` options, with a route's key and fingerprint
   * resolvers when it has its own. Throws a `ConfigurationError` when the module has no `idempotency` options.
   */
  idempotencyKeys(overrides?: RouteKeyOverrides): IdempotencyKeys<unknown, unknown, Tx> {
    const base = this.options.idempotency;
    if (base === undefined) {
      throw new ConfigurationError(
        'an @Idempotent() route needs the `idempotency` option of InboxkitModule.forRoot (at least `principal`)',
      );
    }
    const make = (extra: RouteKeyOverrides): IdempotencyKeys<unknown, unknown, Tx> =>
      idempotencyKeys<unknown, unknown, Tx>({
        ...base,
        ...extra,
        seam: this.seam,
        logger: this.logger,
        ...(this.options.meterProvider === undefined ? {} : { meterProvider: this.options.meterProvider }),
      });
    if (overrides === undefined || (overrides.key === undefined && overrides.fingerprint === undefined)) {
      let keys = this.#keys.get('');
      if (keys === undefined) this.#keys.set('', (keys = make({})));
      return keys;
    }
    let keys = this.#overrideKeys.get(overrides);
    if (keys === undefined) this.#overrideKeys.set(overrides, (keys = make(overrides)));
    return keys;
  }

  /** Registers a transport's status for `health()`; returns the function that unregisters it. */
  registerTransport(status: () => TransportStatus): () => void {
    this.#transports.add(status);
    return () => this.#transports.delete(status);
  }

  /** Whether the store answers (`SELECT 1` through the seam) and every registered transport is running. Never rejects. */
  async health(): Promise<InboxkitHealth> {
    let store: InboxkitHealth['store'];
    try {
      await this.seam.query({ sql: 'SELECT 1', parameters: [] });
      store = { reachable: true };
    } catch (error) {
      store = { reachable: false, error: error instanceof Error ? error.message : String(error) };
    }
    const transports = [...this.#transports].map((status) => status());
    const healthy = store.reachable && transports.every((t) => t.state === 'running');
    return { healthy, store, transports };
  }
}
