// The tail of the RabbitMQ start-up failure classifier, shared by the consumer's start() (rabbitmq-consumer.ts)
// and declareTopology() (declare-topology.ts): in a file of its own so that neither imports the other.

import { ConfigurationError, isInboxkitError, isProgrammerError, tlsFailure } from '@inboxkit/core';

/**
 * The error `start()` rejects with when retrying cannot help (a ConfigurationError that says what to change),
 * or `undefined` for a failure a later attempt can get past: the broker down, restarting or still booting, a
 * refused or reset connection, a timeout, a connection closed by the broker while opening.
 */
export function startFailure(err: unknown, queue: string): unknown {
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
  if (code === 404 && /stopped by supervisor|not running|home node|is down/i.test(message)) return undefined;
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
  const tls = tlsFailure(err);
  if (tls !== undefined) {
    return new ConfigurationError(
      `rabbitmqConsumer: the TLS handshake with RabbitMQ failed (${(tls as Error).message}): check the amqps URL, ` +
        'the port (TLS and plain AMQP listen on different ports) and the certificates',
      { cause: err },
    );
  }
  if (isInboxkitError(err) && !err.retriable) return err;
  if (isProgrammerError(err)) {
    return new ConfigurationError(
      `rabbitmqConsumer: connecting failed with ${(err as Error).name}: ${message}; retrying cannot fix that: check \`connect\` and its options`,
      { cause: err },
    );
  }
  return undefined;
}
