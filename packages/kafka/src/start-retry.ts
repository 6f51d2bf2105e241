// start() keeps trying to reach the broker, as a consumer that lost its connection after start does: a process
// started while the broker restarts (or before it is up) waits for it instead of exiting. Failures retrying
// cannot fix (credentials, permissions, a conflicting topology) reject at once; `startTimeoutMs` bounds the rest.
// The retry loop and the classifier are core's (`retryStart`, `startFailureClassifier`); what is here
// is this transport's own reading of its client's errors.

import {
  ConfigurationError,
  errorChain,
  errorField as field,
  isTransientSocketError,
  startFailureClassifier,
} from '@inboxkit/core';

/** Kafka error types that mean "the credentials or the ACLs say no": no retry fixes them. */
const AUTH_TYPES = new Set([
  'SASL_AUTHENTICATION_FAILED',
  'ILLEGAL_SASL_STATE',
  'UNSUPPORTED_SASL_MECHANISM',
  'TOPIC_AUTHORIZATION_FAILED',
  'GROUP_AUTHORIZATION_FAILED',
  'CLUSTER_AUTHORIZATION_FAILED',
  'TRANSACTIONAL_ID_AUTHORIZATION_FAILED',
]);

/** Kafka error types that mean "the request's settings are invalid". */
const INVALID_TYPES = new Set([
  'INVALID_TOPIC_EXCEPTION',
  'INVALID_GROUP_ID',
  'INVALID_SESSION_TIMEOUT',
  'INCONSISTENT_GROUP_PROTOCOL',
  'INVALID_CONFIG',
  'UNSUPPORTED_VERSION',
]);

/** kafkajs errors that are transient whatever their `retriable` flag says (kafkajs restarts on them too). */
const TRANSIENT_NAMES = new Set([
  'KafkaJSNumberOfRetriesExceeded',
  'KafkaJSConnectionError',
  'KafkaJSConnectionClosedError',
  'KafkaJSRequestTimeoutError',
  'KafkaJSBrokerNotFound',
  'KafkaJSGroupCoordinatorNotFound',
  'KafkaJSMetadataNotLoaded',
  'KafkaJSTopicMetadataNotLoaded',
  'KafkaJSLockTimeout',
  'KafkaJSStaleTopicMetadataAssignment',
]);

/** Kafka's own table: credentials, ACLs and invalid settings reject at once with what to change. */
function kafkaKnownFailure(error: unknown): unknown {
  for (const e of errorChain(error)) {
    const type = field(e, 'type');
    if (field(e, 'name') === 'KafkaJSSASLAuthenticationError' || AUTH_TYPES.has(type as string)) {
      return new ConfigurationError(
        `Kafka refused the client's credentials or permissions (${String(type ?? field(e, 'name'))}: ` +
          `${String(field(e, 'message'))}): check the \`sasl\` settings (mechanism, user, password) and \`ssl\` of ` +
          'new Kafka({ … }), and the ACLs of the user for the consumer group, the topics and their dead-letter topics',
        { cause: error },
      );
    }
    if (INVALID_TYPES.has(type as string)) {
      return new ConfigurationError(
        `Kafka rejected the consumer's settings (${String(type)}: ${String(field(e, 'message'))}): check the ` +
          "group id, the topic names and the session timeout (within the broker's group.min/max.session.timeout.ms)",
        { cause: error },
      );
    }
  }
  return undefined;
}

/**
 * The error `start()` rejects with when retrying cannot help (a ConfigurationError that says what to change,
 * or a non-retriable kafkajs error as it is), or `undefined` for a transient failure: a broker down, starting
 * or unreachable, a timeout, no group coordinator or metadata yet. Core's classifier fed with Kafka's tables;
 * an error no rule knows rejects as it is (kafkajs marks what a retry cannot fix: `retriable: false`).
 */
export const kafkaStartFailure = startFailureClassifier({
  what: 'kafkaConsumer',
  known: kafkaKnownFailure,
  service: 'Kafka',
  tlsHint:
    'check `ssl` of new Kafka({ … }), the broker port (TLS and plaintext listeners differ) and the certificates',
  programmerHint: 'check the options of the Kafka client and consumer',
  isTransient: (error) =>
    isTransientSocketError(error) ||
    errorChain(error).some(
      (e) => field(e, 'retriable') === true || TRANSIENT_NAMES.has(field(e, 'name') as string),
    ),
  unknown: 'permanent',
});
