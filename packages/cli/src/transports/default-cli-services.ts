// The connections `runCli` makes when the caller passes none: a pg pool for the inbox and the real broker
// clients of the transport packages.

import type { CliServices } from '../cli-services.js';
import { openDatabase } from '../inbox/open-database.js';

/**
 * The real services. Each transport's client library is loaded only when that transport is used, so
 * `status` or `migrate` do not pay for kafkajs, amqplib and the AWS SDK. `env` supplies AWS credentials' presence; `consumer` names the consumer of dead letters a
 * broker made itself (RabbitMQ delivery limit).
 */
export function defaultCliServices(
  env: Readonly<Record<string, string | undefined>>,
  consumer?: string,
): CliServices {
  return {
    openDatabase,
    async openTransport(transport, settings, options) {
      switch (transport) {
        case 'kafka':
          return (await import('./open-kafka.js')).openKafka(settings, options);
        case 'rabbitmq':
          return (await import('./open-rabbitmq.js')).openRabbitmq(settings, options, consumer);
        case 'sqs':
          return (await import('./open-sqs.js')).openSqs(settings, options, env);
        case 'nats':
          return (await import('./open-nats.js')).openNats(settings, options);
      }
    },
  };
}
