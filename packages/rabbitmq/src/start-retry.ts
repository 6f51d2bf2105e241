// start() (and declareTopology) keep trying to reach the broker while it is down, restarting or still booting;
// failures retrying cannot fix reject at once. The classifier is core's (`startFailureClassifier`); what is here
// is RabbitMQ's own table: the AMQP reply codes and amqplib's messages that say what to change.

import { ConfigurationError, startFailureClassifier, TRANSIENT } from '@inboxkit/core';

/** RabbitMQ's reading of a failure to start consuming `queue`: an error to reject with, TRANSIENT, or unknown. */
function rabbitmqKnownFailure(err: unknown, queue: string): unknown {
  const code = (err as { code?: unknown } | undefined)?.code;
  const message = (err as Error | undefined)?.message ?? String(err);
  if (code === 406) {
    return new ConfigurationError(
      `RabbitMQ refused the topology of queue "${queue}" (PRECONDITION_FAILED: ${message}). A queue's arguments cannot ` +
        'change: make the topology options match the existing queues, apply the settings by policy and set ' +
        '`topology.declare: false`, or delete the queues',
      { cause: err },
    );
  }
  // A queue process restarting (a node booting, a leader moving) answers NOT_FOUND for a moment: transient.
  if (code === 404 && /stopped by supervisor|not running|home node|is down/i.test(message)) return TRANSIENT;
  if (code === 404) {
    return new ConfigurationError(
      `RabbitMQ has no queue or exchange needed by "${queue}" (NOT_FOUND: ${message}): declare the topology ` +
        '(`topology.declare: true`, or declareTopology()) or fix the names',
      { cause: err },
    );
  }
  if (code === 403) {
    return new ConfigurationError(
      `RabbitMQ refused access for queue "${queue}" (ACCESS_REFUSED: ${message}): grant the user configure/write/read permissions`,
      { cause: err },
    );
  }
  if (/ACCESS.REFUSED|Handshake terminated by server: 403/.test(message)) {
    return new ConfigurationError(
      `RabbitMQ refused the login (${message}): fix the user name and password in the connection URL (or \`connect\`), ` +
        'and check that the user exists and may access the virtual host',
      { cause: err },
    );
  }
  if (/Expected amqp: or amqps:/.test(message)) {
    return new ConfigurationError(`rabbitmqConsumer: the connection URL is invalid (${message})`, {
      cause: err,
    });
  }
  return undefined;
}

/**
 * The error `start()` rejects with when retrying cannot help (a ConfigurationError that says what to change),
 * or `undefined` for a failure a later attempt can get past: the broker down, restarting or still booting, a
 * refused or reset connection, a timeout, a connection closed by the broker while opening.
 */
export function startFailure(err: unknown, queue: string): unknown {
  return startFailureClassifier({
    what: 'rabbitmqConsumer',
    known: (error) => rabbitmqKnownFailure(error, queue),
    service: 'RabbitMQ',
    tlsHint:
      'check the amqps URL, the port (TLS and plain AMQP listen on different ports) and the certificates',
    doing: 'connecting',
    programmerHint: 'check `connect` and its options',
    unknown: 'transient',
  })(err);
}
