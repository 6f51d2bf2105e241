// The CLI's NATS connection: one connection from --nats-url, the DLQ reader (a JetStream stream, read in place)
// and the publisher of @inboxkit/nats on it. `--from` names the DLQ stream; a replay publishes to the source
// subject recorded in the dead letter (or `--to SUBJECT`).

import { ConfigurationError } from '@inboxkit/core';
import { natsDeadLetterQueue, natsPublisher } from '@inboxkit/nats';
import { connect } from '@nats-io/transport-node';

import type { OpenedTransport, OpenTransportOptions } from '../cli-services.js';
import type { ConnectionSettings } from '../settings/connection-settings.js';
import { maskConnectionString } from '../settings/mask-connection-string.js';

/** Opens the DLQ stream `options.from` and, for a replay, a publisher. */
export async function openNats(
  settings: ConnectionSettings,
  options: OpenTransportOptions,
): Promise<OpenedTransport> {
  if (settings.natsUrl === undefined) {
    throw new ConfigurationError('no NATS configured: pass --nats-url nats://… or set NATS_URL');
  }
  let connection;
  try {
    connection = await connect({ servers: settings.natsUrl, maxReconnectAttempts: 3 });
  } catch (error) {
    throw new ConfigurationError(
      `cannot connect to NATS at ${maskConnectionString(settings.natsUrl)}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  const nc = connection;
  return {
    reader: natsDeadLetterQueue({ connection: nc, stream: options.from }),
    publisher: options.publish ? natsPublisher({ connection: nc }) : undefined,
    resolveDestination: async (to) => to,
    close: async () => nc.close(),
  };
}
