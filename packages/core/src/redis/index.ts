// @inboxkit/core/redis: the consumer's fast path on Redis (node-redis or ioredis, the application's client).

export {
  redisFastPath,
  type IoRedisLike,
  type NodeRedisLike,
  type RedisFastPathOptions,
} from './redis-fast-path.js';
