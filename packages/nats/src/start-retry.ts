// start() keeps trying while JetStream does not answer (a server still starting, no responders yet); failures
// retrying cannot fix reject at once. The retry loop and the classifier are core's (`retryStart`,
// `startFailureClassifier`); what is here is NATS's own reading of its client's errors.

import { ConfigurationError, startFailureClassifier, TRANSIENT } from '@inboxkit/core';

/**
 * The error `start()` rejects with when retrying cannot help (a closed connection, a programmer error, an
 * unknown failure as it is), or `undefined` for a transient one (a timeout, no responders, JetStream not ready).
 */
export const natsStartFailure = startFailureClassifier({
  what: 'natsConsumer',
  known: (error) => {
    const name = (error as { name?: unknown } | null)?.name;
    if (name === 'ClosedConnectionError')
      return new ConfigurationError('natsConsumer: the NATS connection is closed', { cause: error });
    if (name === 'TimeoutError' || name === 'NoRespondersError' || name === 'RequestError') return TRANSIENT;
    if ((error as { status?: unknown } | null)?.status === 503) return TRANSIENT; // JetStream not ready yet
    return undefined;
  },
  service: 'the NATS server',
  tlsHint: 'check the server URL and its certificate',
  doing: 'starting the JetStream consumer',
  programmerHint: 'check the connection and the stream and consumer names',
  unknown: 'permanent',
});
