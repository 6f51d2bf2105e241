// The fingerprint of a dead letter's payload, for predicting `payload-mismatch`. Computed only for dead
// letters dead-lettered *because* of a payload mismatch: for every other reason the DLQ copy carries the
// body the row was written with, and the CLI cannot know a consumer's custom `decode` anyway.

import { decodeJson, fingerprintPayload } from '@inboxkit/core';
import type { DeadLetterEntry, DeadLetterRecord } from '@inboxkit/core';

/** Core's fingerprint of the entry's JSON body when its reason is `payload-mismatch`; otherwise `undefined`. */
export function replayFingerprint(
  entry: DeadLetterEntry,
  record: DeadLetterRecord | undefined,
): string | undefined {
  if (record?.reason !== 'payload-mismatch') return undefined;
  try {
    return fingerprintPayload(decodeJson(entry.body));
  } catch {
    return undefined;
  }
}
