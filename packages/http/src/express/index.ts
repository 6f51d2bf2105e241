// @inboxkit/http/express: Idempotency-Key middleware for inboxkit: the inbox's guarantee at the HTTP edge (Express, Fastify, node:http).
export {};
