// @inboxkit/http/node: the Idempotency-Key protocol around a plain node:http request listener.

export {
  idempotentNodeHandler,
  writeHttpResponse,
  type NodeHandlerOptions,
  type NodeIdempotentHandler,
} from './idempotent-node-handler.js';
