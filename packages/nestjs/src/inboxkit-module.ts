// InboxkitModule: the Nest module that provides the inbox (Inboxkit, INBOXKIT_STORE) to the whole application,
// the interceptor of @Idempotent() routes, and the global interceptor that hands inboxkit consumers the
// original error of a failed @EventPattern handler (Nest's RPC exception layer would replace it).

import { Module, type DynamicModule, type Provider } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { Inboxkit } from './inboxkit.js';
import type { InboxkitModuleAsyncOptions, InboxkitModuleOptions } from './inboxkit-module-options.js';
import { INBOXKIT_OPTIONS, INBOXKIT_STORE } from './inboxkit-tokens.js';
import { InboxHandlerErrorInterceptor } from './inbox-handler-error-interceptor.js';

function inboxkitModule(options: Provider, imports: DynamicModule['imports'] = []): DynamicModule {
  return {
    module: InboxkitModule,
    global: true,
    imports,
    providers: [
      options,
      {
        provide: Inboxkit,
        useFactory: (o: InboxkitModuleOptions) => new Inboxkit(o),
        inject: [INBOXKIT_OPTIONS],
      },
      { provide: INBOXKIT_STORE, useFactory: (inboxkit: Inboxkit) => inboxkit.store, inject: [Inboxkit] },
      { provide: APP_INTERCEPTOR, useClass: InboxHandlerErrorInterceptor },
    ],
    exports: [INBOXKIT_OPTIONS, Inboxkit, INBOXKIT_STORE],
  };
}

/**
 * The inbox for a Nest application (global: import it once, in the root module). Provides `Inboxkit` (the
 * store, consumers with the module's defaults, the Idempotency-Key protocol, health) and `INBOXKIT_STORE`.
 *
 * @example
 * @Module({ imports: [InboxkitModule.forRoot({ seam: pgSeam(pool), idempotency: { principal } })] })
 * export class AppModule {}
 */
@Module({})
export class InboxkitModule {
  /** The module with fixed options. Throws a `ConfigurationError` at start-up for bad options. */
  static forRoot<Tx>(options: InboxkitModuleOptions<Tx>): DynamicModule {
    return inboxkitModule({ provide: INBOXKIT_OPTIONS, useValue: options });
  }

  /**
   * The module with options made by a factory (from `ConfigService`, a secret store …).
   *
   * @example
   * InboxkitModule.forRootAsync({ imports: [ConfigModule], inject: [ConfigService],
   *   useFactory: (config: ConfigService) => ({ seam: pgSeam(new pg.Pool({ connectionString: config.get('DATABASE_URL') })) }) });
   */
  static forRootAsync<Tx>(options: InboxkitModuleAsyncOptions<Tx>): DynamicModule {
    return inboxkitModule(
      {
        provide: INBOXKIT_OPTIONS,
        useFactory: options.useFactory as (...args: unknown[]) => unknown,
        inject: options.inject ?? [],
      },
      options.imports ?? [],
    );
  }
}
