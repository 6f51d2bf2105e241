// The configuration invariants of DESIGN §5, checked all at once (core stops at the first at start-up): each
// failed check says which setting to change and to what.

import { retryHorizonMs as coreRetryHorizonMs } from '@inboxkit/core';

import { formatDuration } from '../settings/parse-values.js';
import type { ConsumerSettings } from './consumer-settings.js';
import { displayName } from '../output/display-text.js';

/** The result of one doctor check. */
export interface DoctorCheck {
  /** What was checked (`postgres`, `orders: dedupe window vs retry horizon`). */
  readonly name: string;
  /** `fail` makes `doctor` exit 1; `warn` does not. */
  readonly status: 'ok' | 'warn' | 'fail' | 'skip';
  readonly detail: string;
  /** What to change, for `warn` and `fail`. */
  readonly fix?: string | undefined;
}

/**
 * Core's retry horizon (the sum of the largest backoff delays between `maxAttempts` attempts): the dedupe
 * window must cover it, and `idempotentConsumer()` refuses to start when it does not.
 */
export function retryHorizonMs(s: ConsumerSettings): number {
  return coreRetryHorizonMs(
    {
      initialDelayMs: s.backoffInitialMs,
      multiplier: s.backoffMultiplier,
      maxDelayMs: s.backoffMaxMs,
      jitter: 'none',
    },
    s.maxAttempts,
  );
}

/**
 * The retry horizon plus every attempt running to its timeout (the lease, in leased mode, where a crashed
 * attempt holds the message until the lease ends): the worst case from first delivery to last attempt.
 */
export function worstCaseRetryTimeMs(s: ConsumerSettings): number {
  const perAttempt = s.mode === 'leased' ? Math.max(s.leaseMs, s.handlerTimeoutMs) : s.handlerTimeoutMs;
  return retryHorizonMs(s) + s.maxAttempts * perAttempt;
}

/** Checks one consumer's settings; returns one result per invariant. */
export function checkConfigInvariants(s: ConsumerSettings): DoctorCheck[] {
  const checks: DoctorCheck[] = [];
  const d = formatDuration;
  const horizon = retryHorizonMs(s);
  const worst = worstCaseRetryTimeMs(s);
  const name = `${displayName(s.name)}: dedupe window vs retry horizon`;
  const schedule = `${s.maxAttempts} attempts, backoff ${d(s.backoffInitialMs)}×${s.backoffMultiplier} capped at ${d(s.backoffMaxMs)}`;
  if (s.dedupeWindowMs < horizon) {
    checks.push({
      name,
      status: 'fail',
      detail: `window ${d(s.dedupeWindowMs)} < retry horizon ${d(horizon)} (${schedule}): a late retry could find its id forgotten; idempotentConsumer() refuses this configuration`,
      fix: `raise dedupeWindow to at least ${d(horizon)}, or lower maxAttempts / backoff.maxDelay`,
    });
  } else if (s.dedupeWindowMs < worst) {
    checks.push({
      name,
      status: 'warn',
      detail: `window ${d(s.dedupeWindowMs)} covers the retry horizon ${d(horizon)} but not the ${d(worst)} it takes when every attempt also runs to its ${s.mode === 'leased' ? 'lease' : 'handler timeout'}`,
      fix: `raise dedupeWindow to at least ${d(worst)}`,
    });
  } else {
    checks.push({
      name,
      status: 'ok',
      detail: `window ${d(s.dedupeWindowMs)} ≥ retry horizon ${d(horizon)} (${d(worst)} with every attempt at its timeout)`,
    });
  }
  if (s.mode === 'leased') {
    checks.push(
      s.leaseMs > s.handlerTimeoutMs
        ? {
            name: `${displayName(s.name)}: lease vs handler timeout`,
            status: 'ok',
            detail: `lease ${d(s.leaseMs)} > handler timeout ${d(s.handlerTimeoutMs)}`,
          }
        : {
            name: `${displayName(s.name)}: lease vs handler timeout`,
            status: 'fail',
            detail: `lease ${d(s.leaseMs)} ≤ handler timeout ${d(s.handlerTimeoutMs)}: another worker can take a message over while its handler still runs`,
            fix: `raise lease above ${d(s.handlerTimeoutMs)} (e.g. ${d(s.handlerTimeoutMs * 2)}) or lower handlerTimeout`,
          },
    );
  }
  if (s.sqsVisibilityTimeoutMs !== undefined) {
    checks.push(
      s.sqsVisibilityTimeoutMs > s.handlerTimeoutMs
        ? {
            name: `${displayName(s.name)}: SQS visibility vs handler timeout`,
            status: 'ok',
            detail: `visibility ${d(s.sqsVisibilityTimeoutMs)} > handler timeout ${d(s.handlerTimeoutMs)}`,
          }
        : {
            name: `${displayName(s.name)}: SQS visibility vs handler timeout`,
            status: 'fail',
            detail: `visibility ${d(s.sqsVisibilityTimeoutMs)} ≤ handler timeout ${d(s.handlerTimeoutMs)}: SQS can hand the message to another worker mid-handler`,
            fix: `raise the queue's VisibilityTimeout above ${d(s.handlerTimeoutMs)} (e.g. ${d(Math.ceil((s.handlerTimeoutMs * 2) / 1000) * 1000)}) or lower handlerTimeout`,
          },
    );
  } else {
    checks.push({
      name: `${displayName(s.name)}: SQS visibility vs handler timeout`,
      status: 'skip',
      detail: 'no SQS visibility timeout given (--sqs-visibility-timeout, or --transport sqs --source QUEUE)',
    });
  }
  const limit = (what: string, value: number | undefined, setting: string): void => {
    if (value === undefined) return;
    checks.push(
      value > s.maxAttempts
        ? {
            name: `${displayName(s.name)}: ${what} vs maxAttempts`,
            status: 'ok',
            detail: `${what} ${value} > maxAttempts ${s.maxAttempts}`,
          }
        : {
            name: `${displayName(s.name)}: ${what} vs maxAttempts`,
            status: 'fail',
            detail: `${what} ${value} ≤ maxAttempts ${s.maxAttempts}: the broker dead-letters messages before inboxkit records why`,
            fix: `raise ${setting} to at least ${s.maxAttempts + Math.max(5, s.maxAttempts)} (maxAttempts + headroom) or lower maxAttempts below ${value}`,
          },
    );
  };
  limit('SQS maxReceiveCount', s.sqsMaxReceiveCount, "the source queue's RedrivePolicy maxReceiveCount");
  limit('RabbitMQ x-delivery-limit', s.rabbitmqDeliveryLimit, "the source queue's x-delivery-limit");
  return checks;
}
