// The transport's own cost, without Postgres: kafkaConsumer over an in-memory inbox and a handler that does
// nothing, against a plain kafkajs consumer that does nothing and the same idempotent consumer called directly.
// Prints messages/s and this process's CPU per message: what the transport adds to kafkajs and to core shows
// even on a busy machine, where throughput alone swings.
//
//   node --import tsx packages/kafka/bench/transport-overhead.ts [--messages N] [--rounds R]
//   (the built package: build it first, `npx turbo run build --filter=@inboxkit/kafka`; the TypeScript sources:
//   add --conditions=@inboxkit/source before --import)

import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { idempotentConsumer } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { Kafka, logLevel } from 'kafkajs';
import { kafkaConsumer } from '@inboxkit/kafka';
import { kafkaBrokers } from '../test/support/kafka-services.js';

const { values: args } = parseArgs({
  options: {
    messages: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '2' },
    only: { type: 'string' },
  },
});
const N = Number(args.messages);
const PARTITIONS = 4;
const kafka = new Kafka({ clientId: 'overhead', brokers: kafkaBrokers(), logLevel: logLevel.NOTHING });

type Variant = 'plain eachMessage' | 'message' | 'batch' | 'core alone';

async function round(variant: Variant): Promise<{ perSecond: number; micros: number }> {
  let done = 0;
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const hit = () => {
    if (++done === N) finish();
  };
  const handler = idempotentConsumer({
    name: `overhead-${randomBytes(4).toString('hex')}`,
    store: new InMemoryInboxStore(),
    handler: async () => undefined,
    hooks: { onOutcome: hit },
  });
  if (variant === 'core alone') {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: PARTITIONS }, async () => {
        while (next < N) {
          const i = next++;
          await handler.handle({
            id: `m-${i}`,
            body: Buffer.from('{}'),
            headers: {},
            deliveryCount: 1,
            source: { transport: 'kafka', destination: 't', partition: i % PARTITIONS, offset: String(i) },
          });
        }
      }),
    );
    const cpu = process.cpuUsage(cpu0);
    return { perSecond: N / ((performance.now() - t0) / 1000), micros: (cpu.user + cpu.system) / N };
  }
  const topic = `overhead-${randomBytes(4).toString('hex')}`;
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    waitForLeaders: true,
    topics: [
      { topic, numPartitions: PARTITIONS },
      { topic: `${topic}.dlq`, numPartitions: 1 },
    ],
  });
  const producer = kafka.producer();
  await producer.connect();
  for (let i = 0; i < N; i += 1_000) {
    await producer.send({
      topic,
      acks: -1,
      messages: Array.from({ length: Math.min(1_000, N - i) }, (_, k) => ({
        key: `key-${(i + k) % 1_000}`,
        value: '{}',
        headers: { 'message-id': `${topic}-${i + k}` },
      })),
    });
  }
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: `g-${topic}`, maxWaitTimeInMs: 100 });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let stop: () => Promise<void>;
  if (variant === 'plain eachMessage') {
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({ partitionsConsumedConcurrently: PARTITIONS, eachMessage: async () => hit() });
    stop = () => consumer.stop();
  } else {
    const transport = kafkaConsumer({
      consumer,
      kafka,
      topics: [topic],
      handler,
      mode: variant === 'batch' ? 'batch' : 'message',
      partitionConcurrency: PARTITIONS,
      fromBeginning: true,
    });
    await transport.start();
    stop = () => transport.stop();
  }
  await finished;
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await stop();
  await consumer.disconnect();
  await admin.deleteTopics({ topics: [topic, `${topic}.dlq`] }).catch(() => undefined);
  await admin.disconnect();
  return { perSecond: N / seconds, micros: (cpu.user + cpu.system) / N };
}

const variants: Variant[] = args.only
  ? (args.only.split(',') as Variant[])
  : ['plain eachMessage', 'core alone', 'message', 'batch'];
for (let r = 0; r < Number(args.rounds); r++) {
  for (const v of variants) {
    const x = await round(v);
    console.log(
      `${v.padEnd(20)} ${x.perSecond.toFixed(0).padStart(7)} msg/s  node ${x.micros.toFixed(1).padStart(6)} µs/msg (includes the start)`,
    );
  }
}
