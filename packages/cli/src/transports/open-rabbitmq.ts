// The CLI's RabbitMQ connection: one amqplib connection from --amqp-url, the DLQ reader of @inboxkit/rabbitmq
// and, for a replay, a publisher on a confirm channel.

import { ConfigurationError } from '@inboxkit/core';
import { rabbitmqDeadLetterQueue, rabbitmqPublisher } from '@inboxkit/rabbitmq';
import amqplib from 'amqplib';

import type { OpenedTransport, OpenTransportOptions } from '../cli-services.js';
import type { ConnectionSettings } from '../settings/connection-settings.js';
import { maskConnectionString } from '../settings/mask-connection-string.js';
import { SecretScrubber } from '../settings/secret-scrubber.js';

/** Connects to `settings.amqpUrl`, with an error that names the (masked) URL. */
export async function connectAmqp(settings: ConnectionSettings): Promise<amqplib.ChannelModel> {
  if (settings.amqpUrl === undefined) {
    throw new ConfigurationError('no RabbitMQ configured: pass --amqp-url amqp://… or set AMQP_URL');
  }
  try {
    const connection = await amqplib.connect(settings.amqpUrl, {
      clientProperties: { connection_name: 'inboxkit-cli' },
    });
    connection.on('error', () => undefined); // reported by the operation that fails
    return connection;
  } catch (error) {
    throw new ConfigurationError(
      `cannot connect to RabbitMQ at ${maskConnectionString(settings.amqpUrl)}: ${new SecretScrubber().addConnectionString(settings.amqpUrl).scrub((error as Error).message)}`,
      { cause: error },
    );
  }
}

/** Opens the RabbitMQ DLQ queue `options.from` and, for a replay, a confirm-channel publisher. */
export async function openRabbitmq(
  settings: ConnectionSettings,
  options: OpenTransportOptions,
  consumer: string | undefined,
): Promise<OpenedTransport> {
  const connection = await connectAmqp(settings);
  try {
    const channel = options.publish ? await connection.createConfirmChannel() : undefined;
    channel?.on('error', () => undefined); // a failed publish rejects; the event must not crash the CLI
    const reader = rabbitmqDeadLetterQueue({
      connection,
      queue: options.from.replace(/\.dlq$/, '') || options.from,
      deadLetterQueue: options.from,
      ...(consumer !== undefined ? { consumer } : {}),
    });
    return {
      reader,
      publisher: channel === undefined ? undefined : rabbitmqPublisher({ channel }),
      resolveDestination: async (to) => to,
      close: async () => {
        await reader.close().catch(() => undefined);
        await connection.close().catch(() => undefined);
      },
    };
  } catch (error) {
    await connection.close().catch(() => undefined);
    throw error;
  }
}
