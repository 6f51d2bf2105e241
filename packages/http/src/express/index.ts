// @inboxkit/http/express: the Idempotency-Key protocol around an Express route handler.

export {
  idempotentExpressHandler,
  type ExpressHandlerOptions,
  type ExpressIdempotentHandler,
} from './idempotent-express-handler.js';
