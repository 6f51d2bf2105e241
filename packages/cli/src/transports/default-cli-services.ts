// The connections `runCli` makes when the caller passes none: a pg pool for the inbox and the real broker
// clients of the transport packages.

import type { CliServices } from '../cli-services.js';
import { openDatabase } from '../inbox/open-database.js';
import { openKafka } from './open-kafka.js';
import { openRabbitmq } from './open-rabbitmq.js';
import { openSqs } from './open-sqs.js';

/**
 * The real services. `env` supplies AWS credentials' presence; `consumer` names the consumer of dead letters a
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
          return openKafka(settings, options);
        case 'rabbitmq':
          return openRabbitmq(settings, options, consumer);
        case 'sqs':
          return openSqs(settings, options, env);
      }
    },
  };
}
