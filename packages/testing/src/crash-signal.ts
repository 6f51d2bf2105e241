// The simulated death of a consuming process. The learning transport and assertIdempotentHandler inject it
// at the seams where a real crash loses work: before the handler, after the handler but before the
// transaction commits, and after the commit but before the broker is acked.

import { InboxkitError } from '@inboxkit/core';

/** Where a crash is injected in the life of one delivery. */
export type CrashSeam = 'before-handler' | 'after-handler-before-commit' | 'after-commit-before-ack';

/** Every seam, in the order a delivery passes them. */
export const CRASH_SEAMS: readonly CrashSeam[] = [
  'before-handler',
  'after-handler-before-commit',
  'after-commit-before-ack',
];

const BRAND = Symbol.for('inboxkit.testing.crash-signal');

/**
 * Thrown from a wrapped handler after the user's handler returned, so the handler's transaction rolls back
 * exactly as it would when the process died before COMMIT. It is retriable with a delay of 0, so core never
 * dead-letters because of it and a redelivery may claim the message at once, as after a real crash; the
 * transport drops the delivery without settling it.
 */
export class CrashSignal extends InboxkitError {
  readonly seam: CrashSeam;
  /** Read by core's classifier as the retry delay: a dead process leaves no backoff behind. */
  readonly delayMs = 0;

  constructor(seam: CrashSeam) {
    super('CRASH_SIGNAL', `simulated process crash (${seam})`, true);
    this.seam = seam;
    Object.defineProperty(this, BRAND, { value: true });
  }
}

/** True for a `CrashSignal`, also one thrown by another copy of this package. */
export function isCrashSignal(value: unknown): value is CrashSignal {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
}
