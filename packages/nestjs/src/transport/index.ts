// @inboxkit/nestjs/transport: exactly-once @EventPattern handlers. A custom transport strategy running
// inboxkit's own broker consumers, the handler's context and its parameter decorators. Loads
// @nestjs/microservices, which the main entry point does not need.

export {
  InboxkitTransport,
  type InboxConsumerBinding,
  type InboxkitTransportOptions,
} from './inboxkit-transport.js';
export { InboxContext } from './inbox-context.js';
export { InboxCtx, InboxTx } from './inbox-params.js';
