// The fingerprint of a dead letter's payload, for predicting `payload-mismatch`. Computed only for dead
// letters dead-lettered *because* of a payload mismatch: for every other reason the DLQ copy carries the
// body the row was written with, and the CLI cannot know a consumer's custom `decode` anyway. With the
// consumer's `fingerprint` option (`--schemas` module's `fingerprints`) it is the consumer's own fingerprint;
// without it the whole payload's, as a consumer without the option computes it.

import { checkFingerprintResolver, decodeJsonBody, fingerprintJson, fingerprintPayload } from '@inboxkit/core';
import type {
  DeadLetterEntry,
  DeadLetterRecord,
  FingerprintInput,
  FingerprintResolver,
} from '@inboxkit/core';

/**
 * The fingerprint the consumer will compute for the entry's JSON body (with the default decoder) when its
 * reason is `payload-mismatch`; otherwise `undefined` (also when the body or the option cannot fingerprint
 * it: the prediction then does not claim a mismatch).
 *
 * `fingerprint` is the consumer's `fingerprint` option (`{ exclude: [...] }`, `{ include: [...] }` or a
 * function of `{ id, payload, headers }`, as `idempotentConsumer` takes it). Default: none, the whole payload
 * is fingerprinted.
 *
 * @example
 * replayFingerprint(entry, parseDeadLetterHeaders(entry.headers), { exclude: ['sentAt'] });
 */
export function replayFingerprint(
  entry: DeadLetterEntry,
  record: DeadLetterRecord | undefined,
  fingerprint?: FingerprintResolver<FingerprintInput>,
): string | undefined {
  if (record?.reason !== 'payload-mismatch') return undefined;
  try {
    const { text, value } = decodeJsonBody(entry.body);
    if (fingerprint === undefined) return fingerprintJson(text, value);
    const resolver = checkFingerprintResolver(fingerprint, 'fingerprint')!;
    const input: FingerprintInput = {
      id: entry.id ?? record.originalId ?? '',
      payload: value,
      headers: entry.headers,
    };
    return fingerprintPayload(resolver.project(input, value));
  } catch {
    return undefined;
  }
}
