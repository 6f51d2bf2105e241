// start() keeps trying to reach the broker, as a consumer that lost its connection after start does: a process
// started while the broker restarts (or before it is up) waits for it instead of exiting. Failures retrying
// cannot fix (credentials, permissions, a conflicting topology) reject at once; `startTimeoutMs` bounds the rest.
// The retry loop and the classifier are core's (`retryStart`, `startFailureClassifier`); what is here is this
// transport's own reading of its client's errors, the tables the classifier is fed with.

import {
  ConfigurationError,
  errorChain,
  errorField as field,
  isTransientSocketError,
  startFailureClassifier,
} from '@inboxkit/core';

/** Error names of a request SQS refused for its credentials or permissions: no retry fixes them. */
const AUTH_NAMES = new Set([
  'InvalidClientTokenId',
  'UnrecognizedClientException',
  'SignatureDoesNotMatch',
  'IncompleteSignature',
  'MissingAuthenticationToken',
  'InvalidSecurity',
  'ExpiredToken',
  'ExpiredTokenException',
  'AccessDenied',
  'AccessDeniedException',
  'KMS.AccessDeniedException',
  'CredentialsProviderError',
]);

/** Error names of a request that may succeed later: throttling, timeouts, a service briefly unavailable. */
const TRANSIENT_NAMES = new Set([
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
  'ThrottlingException',
  'Throttling',
  'RequestThrottled',
  'RequestThrottledException',
  'ServiceUnavailable',
  'InternalError',
  'InternalFailure',
]);

/** The credentials or permission failure in the chain, if any. */
export function sqsAuthFailure(error: unknown): unknown {
  return errorChain(error).find((e) => AUTH_NAMES.has(field(e, 'name') as string));
}

/** True when a later request may get past `error`: the endpoint down or unreachable, throttling, a 5xx. */
export function isSqsTransient(error: unknown): boolean {
  if (isTransientSocketError(error)) return true;
  return errorChain(error).some((e) => {
    const status = (field(e, '$metadata') as { httpStatusCode?: number } | undefined)?.httpStatusCode;
    return (
      field(e, '$retryable') !== undefined ||
      field(e, '$fault') === 'server' ||
      TRANSIENT_NAMES.has(field(e, 'name') as string) ||
      (typeof status === 'number' && (status >= 500 || status === 429))
    );
  });
}

/** SQS's own table for the start-up classifier: a credentials or permission failure says what to grant. */
function sqsKnownFailure(error: unknown): unknown {
  const auth = sqsAuthFailure(error);
  if (auth === undefined) return undefined;
  const name = String(field(auth, 'name'));
  const denied = name.startsWith('AccessDenied') || name.includes('.AccessDenied');
  return new ConfigurationError(
    denied
      ? `sqsConsumer: SQS denied access (${name}: ${String(field(auth, 'message'))}): allow the client's role ` +
          'sqs:GetQueueAttributes, sqs:ReceiveMessage, sqs:DeleteMessage, sqs:ChangeMessageVisibility on the queue and ' +
          'sqs:SendMessage on the dead-letter queue (or set checkQueues: false to skip the start-up check)'
      : `sqsConsumer: SQS refused the client's credentials (${name}: ${String(field(auth, 'message'))}): check the ` +
          'credentials and the region of the SQSClient',
    { cause: error },
  );
}

/**
 * The error `start()` rejects with when retrying cannot help (a ConfigurationError that says what to change,
 * or the error as it is), or `undefined` for a transient failure (SQS or ElasticMQ down, unreachable,
 * throttling, a 5xx): core's classifier fed with SQS's tables.
 */
export const sqsStartFailure: (error: unknown) => unknown = startFailureClassifier({
  what: 'sqsConsumer',
  known: sqsKnownFailure,
  service: 'the SQS endpoint',
  tlsHint: 'check the endpoint URL and its certificate',
  isTransient: isSqsTransient,
  programmerHint: 'check the SQSClient and the queue URLs',
  unknown: 'permanent',
});
