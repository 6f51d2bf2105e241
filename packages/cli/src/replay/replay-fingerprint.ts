// The fingerprint of a dead letter's payload, for predicting `payload-mismatch`. Computed only for dead
// letters dead-lettered *because* of a payload mismatch: for every other reason the DLQ copy carries the
// body the row was written with, and the CLI cannot know a consumer's custom `decode` anyway.

import { decodeJsonBody, fingerprintJson } from '@inboxkit/core';
import type { DeadLetterEntry, DeadLetterRecord } from '@inboxkit/core';

/**
 * Core's fingerprint of the entry's JSON body (as the consumer computes it with the default decoder) when its
 * reason is `payload-mismatch`; otherwise `undefined`.
 */
export function replayFingerprint(
  entry: DeadLetterEntry,
  record: DeadLetterRecord | undefined,
): string | undefined {
  if (record?.reason !== 'payload-mismatch') return undefined;
  try {
    const { text, value } = decodeJsonBody(entry.body);
    return fingerprintJson(text, value);
  } catch {
    return undefined;
  }
}
