// @inboxkit/http/fastify: the Idempotency-Key protocol around a Fastify route handler.

export {
  idempotentFastifyHandler,
  type FastifyHandlerOptions,
  type FastifyIdempotentHandler,
} from './idempotent-fastify-handler.js';
