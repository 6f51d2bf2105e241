// The CLI's SQS connection: an SQSClient from --sqs-endpoint/--region, the DLQ reader and publisher of
// @inboxkit/sqs on it. Queue names are accepted where URLs are expected and resolved with GetQueueUrl.

import { GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import { ConfigurationError } from '@inboxkit/core';
import { sqsDeadLetterQueue, sqsPublisher } from '@inboxkit/sqs';

import type { OpenedTransport, OpenTransportOptions } from '../cli-services.js';
import type { ConnectionSettings } from '../settings/connection-settings.js';

/** An SQSClient for the settings. Against a local endpoint without AWS credentials, dummy ones are used. */
export function sqsClientFor(
  settings: ConnectionSettings,
  env: Readonly<Record<string, string | undefined>>,
): SQSClient {
  const local =
    settings.sqsEndpoint !== undefined &&
    env.AWS_ACCESS_KEY_ID === undefined &&
    env.AWS_PROFILE === undefined;
  return new SQSClient({
    region: settings.region,
    ...(settings.sqsEndpoint !== undefined ? { endpoint: settings.sqsEndpoint } : {}),
    ...(local ? { credentials: { accessKeyId: 'inboxkit', secretAccessKey: 'inboxkit' } } : {}),
  });
}

/** The URL of a queue given by URL or by name. */
export async function sqsQueueUrl(client: SQSClient, queue: string): Promise<string> {
  if (/^https?:\/\//.test(queue)) return queue;
  try {
    const { QueueUrl } = await client.send(new GetQueueUrlCommand({ QueueName: queue }));
    if (QueueUrl === undefined) throw new Error('no QueueUrl in the response');
    return QueueUrl;
  } catch (error) {
    throw new ConfigurationError(
      `SQS queue ${JSON.stringify(queue)} not found: check the name or pass its URL`,
      { cause: error },
    );
  }
}

/** Opens the SQS DLQ `options.from` (URL or name) and, for a replay, a publisher. */
export async function openSqs(
  settings: ConnectionSettings,
  options: OpenTransportOptions,
  env: Readonly<Record<string, string | undefined>>,
): Promise<OpenedTransport> {
  const client = sqsClientFor(settings, env);
  try {
    const queueUrl = await sqsQueueUrl(client, options.from);
    return {
      reader: sqsDeadLetterQueue({ client, queueUrl }),
      publisher: options.publish ? sqsPublisher({ client }) : undefined,
      resolveDestination: (to) => sqsQueueUrl(client, to),
      close: async () => client.destroy(),
    };
  } catch (error) {
    client.destroy();
    throw error;
  }
}
