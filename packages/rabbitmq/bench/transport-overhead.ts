// The transport's own cost, without Postgres: rabbitmqConsumer over an in-memory inbox and a handler that does
// nothing, draining a backlog on the real broker. Prints messages/s and CPU per message of this process and of
// the broker (read from /proc when its pid is known), so a change to the transport's path shows even on a busy
// machine, where throughput alone swings.
//
//   node [--conditions=@inboxkit/source] --import tsx packages/rabbitmq/bench/transport-overhead.ts
//     [--messages N] [--prefetch 1,16] [--rounds R]

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { idempotentConsumer } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import amqp from 'amqplib';
// By package name, as users import it: the built dist/ by default, the TypeScript sources under
// --conditions=@inboxkit/source (`npm run bench -- --source`).
import { declareTopology, rabbitmqConsumer } from '@inboxkit/rabbitmq';
import { amqpUrl } from '../test/amqp-service.js';

const { values: args } = parseArgs({
  options: {
    messages: { type: 'string', default: '5000' },
    prefetch: { type: 'string', default: '1,16' },
    rounds: { type: 'string', default: '3' },
  },
});
const messages = Number(args.messages);
const rounds = Number(args.rounds);
const url = amqpUrl();

/** CPU seconds (user + system) of processes, from /proc; undefined when unreadable. */
function cpuOf(pids: readonly number[]): number | undefined {
  if (pids.length === 0) return undefined;
  try {
    let total = 0;
    for (const pid of pids) {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      total += (Number(fields[11]) + Number(fields[12])) / 100;
    }
    return total;
  } catch {
    return undefined;
  }
}

/** The broker's Erlang VM(s) on this machine. */
function brokerPids(): number[] {
  try {
    return execFileSync('pgrep', ['-f', 'beam.smp'], { encoding: 'utf8' }).trim().split('\n').map(Number);
  } catch {
    return [];
  }
}

async function round(prefetch: number) {
  const admin = await amqp.connect(url);
  const channel = await admin.createConfirmChannel();
  const topology = await declareTopology(channel, {
    queue: `overhead-${randomBytes(4).toString('hex')}`,
    delayBucketsMs: [1_000],
  });
  const n = prefetch === 1 ? Math.ceil(messages / 4) : messages;
  for (let i = 0; i < n; i++) {
    channel.sendToQueue(topology.queue, Buffer.from('{}'), { messageId: `m-${i}`, persistent: true });
    if (i % 500 === 499) await channel.waitForConfirms();
  }
  await channel.waitForConfirms();
  let done = 0;
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const consumer = idempotentConsumer({
    name: `overhead-${topology.queue}`,
    store: new InMemoryInboxStore(),
    handler: async () => undefined,
    hooks: {
      onOutcome: () => {
        if (++done === n) finish();
      },
    },
  });
  const transport = rabbitmqConsumer({
    connect: () => amqp.connect(url),
    queue: topology.queue,
    handler: consumer,
    concurrency: prefetch,
    topology: { declare: false, delayBucketsMs: topology.delayBucketsMs },
  });
  const broker = brokerPids();
  const cpu0 = process.cpuUsage();
  const b0 = cpuOf(broker);
  const t0 = performance.now();
  await transport.start();
  await finished;
  // The last acks leave with the stop; wait for the queue to be empty so the broker's work is counted.
  await transport.stop();
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const b1 = cpuOf(broker);
  const left = (await channel.checkQueue(topology.queue)).messageCount;
  for (const q of [topology.queue, topology.deadLetterQueue, topology.delayQueue(1_000)])
    await channel.deleteQueue(q);
  await channel.deleteExchange(topology.deadLetterExchange);
  await admin.close();
  return {
    perSecond: n / seconds,
    nodeMicros: (cpu.user + cpu.system) / n,
    brokerMicros: b0 !== undefined && b1 !== undefined ? ((b1 - b0) * 1e6) / n : NaN,
    left,
  };
}

for (const prefetch of args.prefetch.split(',').map(Number)) {
  for (let r = 0; r < rounds; r++) {
    const x = await round(prefetch);
    console.log(
      `prefetch ${String(prefetch).padStart(2)}  ${x.perSecond.toFixed(0).padStart(6)} msg/s  node ${x.nodeMicros.toFixed(0).padStart(4)} µs/msg` +
        `  broker ${x.brokerMicros.toFixed(0).padStart(4)} µs/msg  left in queue ${x.left}`,
    );
  }
}
