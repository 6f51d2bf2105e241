// The start-up failure classifier, written once: what `start()` rejects with when retrying cannot help, and
// what it keeps retrying. A transport brings only its tables — its client's error names and codes — and the
// order of the checks, the TLS rule, the programmer-error rule and the default are the same for every broker.

import { ConfigurationError, isInboxkitError } from '../errors.js';
import { errorField as field, isProgrammerError, tlsFailure } from '../start-retry.js';

/** A transport's own reading of its client's errors, for `startFailureClassifier`. */
export interface StartFailureTables {
  /** Names the consumer in messages, e.g. `sqsConsumer`. */
  readonly what: string;
  /**
   * The transport's table, read first: a `ConfigurationError` (or any error) to reject with at once,
   * `'transient'` to keep trying, or `undefined` when it does not know the error.
   */
  readonly known?: (error: unknown) => unknown;
  /** What the broker is called in the TLS message, e.g. `RabbitMQ`, `the SQS endpoint`. */
  readonly service: string;
  /** What to check after a TLS failure, e.g. `check the endpoint URL and its certificate`. */
  readonly tlsHint: string;
  /** What `start()` was doing, in the programmer-error message. Default is `starting`. */
  readonly doing?: string;
  /** What to check after a programmer error (TypeError, RangeError, …), e.g. `check the SQSClient`. */
  readonly programmerHint: string;
  /** True when a later attempt may get past the error (the broker down, throttling, a 5xx). Default: none. */
  readonly isTransient?: (error: unknown) => boolean;
  /**
   * What an error no rule knows is: `transient` (keep trying until `startTimeoutMs`) or `permanent` (reject
   * with it as it is).
   */
  readonly unknown: 'transient' | 'permanent';
}

/** What `known` answers for a failure a later attempt may get past. */
export const TRANSIENT = 'transient';

/**
 * The `permanent` function of `retryStart` for a transport: the error to reject with when retrying cannot help
 * (a `ConfigurationError` saying what to change, or the error as it is), or `undefined` for a failure a later
 * attempt may get past. Checks, in order: the transport's `known` table; a TLS failure in the cause chain
 * (never heals by itself); an inboxkit error that is not retriable; `isTransient`; a programmer error; then the
 * `unknown` default.
 *
 * @example
 * const sqsStartFailure = startFailureClassifier({
 *   what: 'sqsConsumer', known: sqsKnownFailure, isTransient: isSqsTransient, unknown: 'permanent',
 *   service: 'the SQS endpoint', tlsHint: 'check the endpoint URL and its certificate',
 *   programmerHint: 'check the SQSClient and the queue URLs',
 * });
 * await retryStart({ attempt, permanent: sqsStartFailure, ... });
 */
export function startFailureClassifier(tables: StartFailureTables): (error: unknown) => unknown {
  return (error) => {
    const known = tables.known?.(error);
    if (known === TRANSIENT) return undefined;
    if (known !== undefined) return known;
    const tls = tlsFailure(error);
    if (tls !== undefined) {
      return new ConfigurationError(
        `${tables.what}: the TLS handshake with ${tables.service} failed (${String(field(tls, 'message'))}): ${tables.tlsHint}`,
        { cause: error },
      );
    }
    if (isInboxkitError(error) && !error.retriable) return error;
    if (tables.isTransient?.(error) === true) return undefined;
    if (isProgrammerError(error)) {
      return new ConfigurationError(
        `${tables.what}: ${tables.doing ?? 'starting'} failed with ${String(field(error, 'name'))}: ` +
          `${String(field(error, 'message'))}; retrying cannot fix that: ${tables.programmerHint}`,
        { cause: error },
      );
    }
    return tables.unknown === 'transient' ? undefined : error;
  };
}
