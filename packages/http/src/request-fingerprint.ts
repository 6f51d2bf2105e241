// The request fingerprint: SHA-256 of method + route + the canonical query + the canonical body, so the same key
// sent with another payload is caught (422) instead of replaying a response that belongs to a different request.

import { createHash } from 'node:crypto';
import { canonicalJson } from '@inboxkit/core';

/**
 * The fingerprint of a request. JSON bodies are canonicalized (key order does not matter); bytes are hashed
 * as they are. `query` is the canonical query (`canonicalQuery`); an empty one adds nothing, so requests without
 * a query keep the fingerprint they had before queries counted.
 *
 * @example
 * requestFingerprint('POST', '/payments', { amount: 1 }) === requestFingerprint('post', '/payments', { amount: 1 });
 */
export function requestFingerprint(method: string, route: string, body: unknown, query = ''): string {
  const canonical =
    body instanceof Uint8Array
      ? `bytes:${Buffer.from(body).toString('base64')}`
      : `json:${canonicalJson(body ?? null)}`;
  const target = query === '' ? route : `${route}\n?${query}`;
  return createHash('sha256').update(`${method.toUpperCase()}\n${target}\n${canonical}`).digest('hex');
}
