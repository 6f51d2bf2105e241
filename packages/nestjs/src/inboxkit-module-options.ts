// What InboxkitModule is configured with: the application's data layer seam, the inbox tables, the defaults of
// every consumer the transport strategy runs, the Idempotency-Key protocol of @Idempotent() routes, metrics
// and the logger.

import type { IdempotentConsumerConfig, Logger } from '@inboxkit/core';
import type { InboxStoreOptions, SqlSeam } from '@inboxkit/core/postgres';
import type { IdempotencyKeysConfig } from '@inboxkit/http';
import type { FactoryProvider, ModuleMetadata } from '@nestjs/common';

/** Consumer settings that `InboxkitModule` applies to every consumer unless its binding says otherwise. */
export type ConsumerDefaults = Partial<
  Pick<
    IdempotentConsumerConfig<unknown, unknown>,
    | 'maxAttempts'
    | 'backoff'
    | 'dedupeWindowMs'
    | 'mode'
    | 'leaseMs'
    | 'handlerTimeoutMs'
    | 'lockTimeoutMs'
    | 'latePolicy'
    | 'isRetriable'
    | 'maxMessageIdLength'
    | 'hooks'
    | 'fastPath'
    | 'tracerProvider'
  >
>;

/** The Idempotency-Key protocol of `@Idempotent()` routes: `idempotencyKeys`' options but the data layer. */
export type IdempotentRoutesConfig<Tx> = Omit<
  IdempotencyKeysConfig<unknown, unknown, Tx>,
  'db' | 'seam' | 'logger' | 'meterProvider'
>;

/** Options of `InboxkitModule.forRoot`. */
export interface InboxkitModuleOptions<Tx = unknown> {
  /**
   * The application's data layer: the seam of the library it already uses (`pgSeam(pool)`, `prismaSeam(prisma)`,
   * `typeormSeam(dataSource)`, `drizzleSeam(db)`, `knexSeam(knex)` … from `@inboxkit/data`, or `kyselySeam(db)`
   * from `@inboxkit/core/postgres`). Handlers get that library's transaction object (`@InboxTx()`,
   * `context.transaction()`). Required.
   *
   * @example
   * InboxkitModule.forRoot({ seam: prismaSeam(prisma) });
   */
  readonly seam: SqlSeam<Tx>;
  /** Where the inbox tables are (`schema`, table names, layout). Default is the `inboxkit` defaults (schema `public`). */
  readonly inbox?: InboxStoreOptions;
  /** Settings every consumer of the transport strategy starts from (max attempts, backoff …). Default is core's. */
  readonly consumerDefaults?: ConsumerDefaults;
  /**
   * The Idempotency-Key protocol of `@Idempotent()` routes (`principal` is required: there is no safe default).
   * Its keys live in the same database (run `migrateIdempotencyKeys` first). Default is none: an `@Idempotent()`
   * route then fails with a `ConfigurationError` naming this option.
   *
   * @example
   * InboxkitModule.forRoot({ seam, idempotency: { principal: (r) => (r.native as AuthedRequest).user?.id } });
   */
  readonly idempotency?: IdempotentRoutesConfig<Tx>;
  /** Where metrics go (consumers and routes). Default is the global provider of `@opentelemetry/api`. */
  readonly meterProvider?: IdempotentConsumerConfig<unknown, unknown>['meterProvider'];
  /** Logs of consumers, the transport and routes: any pino-style logger. Default is Nest's `Logger` ('Inboxkit'). */
  readonly logger?: Logger;
}

/** Options of `InboxkitModule.forRootAsync`: a factory with its injected dependencies (e.g. `ConfigService`). */
export interface InboxkitModuleAsyncOptions<Tx = unknown> extends Pick<ModuleMetadata, 'imports'> {
  /**
   * Makes the options; may be async.
   *
   * @example
   * InboxkitModule.forRootAsync({ imports: [ConfigModule], inject: [ConfigService],
   *   useFactory: (config: ConfigService) => ({ seam: pgSeam(new pg.Pool({ connectionString: config.get('DATABASE_URL') })) }) });
   */
  readonly useFactory: (...args: never[]) => InboxkitModuleOptions<Tx> | Promise<InboxkitModuleOptions<Tx>>;
  /** Providers whose instances are passed to `useFactory`, in order. Default is none. */
  readonly inject?: FactoryProvider['inject'];
}
