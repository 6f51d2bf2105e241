// @inboxkit/nestjs: inboxkit the Nest way. InboxkitModule provides the inbox over the application's data
// layer; @Idempotent() routes run @inboxkit/http's Idempotency-Key protocol on Express and Fastify. The
// transport strategy for exactly-once @EventPattern handlers is the sub-path export '@inboxkit/nestjs/transport'.

export { InboxkitModule } from './inboxkit-module.js';
export type {
  ConsumerDefaults,
  IdempotentRoutesConfig,
  InboxkitModuleAsyncOptions,
  InboxkitModuleOptions,
} from './inboxkit-module-options.js';
export { Inboxkit, type InboxkitHealth, type RouteKeyOverrides, type TransportStatus } from './inboxkit.js';
export { INBOXKIT_OPTIONS, INBOXKIT_STORE } from './inboxkit-tokens.js';
export { Idempotent } from './idempotent.js';
export { IDEMPOTENT_ROUTE, type IdempotentOptions } from './idempotent-options.js';
export { IdempotencyInterceptor } from './idempotency-interceptor.js';
export { IdempotencyCtx, type IdempotentRouteContext } from './idempotent-route-context.js';
export { idempotentReply, isIdempotentReply, type IdempotentReply } from './idempotent-reply.js';
export { InboxHandlerErrorInterceptor } from './inbox-handler-error-interceptor.js';
export { consumerErrorOf } from './inbox-handler-failure.js';
export { nestLogger } from './nest-logger.js';
