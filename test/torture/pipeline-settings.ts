// What the pipeline torture passes to its service and relay processes (JSON on the command line). Both extend
// the consumer settings, so the consumer pool starts them like consumers; the sink is consumer-process.ts
// itself, on the destination topic, with its own schema (its own inbox and effects table).

import type { ConsumerSettings } from './consumer-settings.js';

/** The step of the service's one outgoing message: its id is deterministicMessageId(service, source id, step). */
export const PIPELINE_STEP = 'forward';

/** The service: the RabbitMQ source consumer with inbox + context.outbox. */
export interface PipelineServiceSettings extends ConsumerSettings {
  /** The destination (a Kafka topic) the outgoing messages are enqueued for. */
  readonly sinkTopic: string;
  /** For the self-test (`broken`): the service publishes straight to Kafka from the handler, no outbox. */
  readonly kafkaBrokers: readonly string[];
}

/** A relay: startOutboxRelay over the run's outbox table, publishing to Kafka. */
export interface PipelineRelaySettings extends ConsumerSettings {
  readonly kafkaBrokers: readonly string[];
  readonly batchSize: number;
  readonly rowsPerKey: number;
  /** Claim loops per relay process (startOutboxRelay's `concurrency`). */
  readonly concurrency: number;
}
