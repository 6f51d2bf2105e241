// `npm run torture` / `npm run torture:quick`: the chaos harness of docs/torture.md. Exits 1 when the
// invariant is violated on any transport (or a run fails), 2 on bad arguments.
//
//   npm run torture -- [--transport kafka,rabbitmq,sqs,nats,pipeline] [--messages 10000] [--kills 20] [--seed N]
//                      [--consumers N] [--kafka-mode mixed|message|batch] [--kafka-client kafkajs,platformatic]
//                      [--duration 80] [--drain-timeout 300]
//                      [--restarts broker,postgres|none] [--pg-outage 5] [--max-attempts 3] [--keep] [--quick]

import { parseArgs } from 'node:util';

import { killAllConsumers } from './consumer-pool.js';
import { formatPipelineReport, pipelinePassed, runPipeline } from './pipeline-run.js';
import type { TransportName } from './consumer-settings.js';
import { KAFKA_TORTURE_CLIENTS, TRANSPORTS } from './consumer-settings.js';
import type { KafkaTortureClient } from './consumer-settings.js';
import { randomSeed } from './prng.js';
import { formatReport, passed } from './report.js';
import { runTorture, SHARES } from './run-torture.js';

function fail(message: string): never {
  process.stderr.write(`torture: ${message}\n`);
  process.exit(2);
}

let args: ReturnType<typeof parse>;
function parse() {
  return parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      transport: { type: 'string', default: 'all' },
      messages: { type: 'string' },
      kills: { type: 'string' },
      seed: { type: 'string' },
      consumers: { type: 'string' },
      'kafka-mode': { type: 'string', default: 'mixed' },
      // The Kafka clients, one Kafka run each: kafkajs, platformatic (@platformatic/kafka) or both.
      'kafka-client': { type: 'string', default: 'kafkajs,platformatic' },
      'pg-outage': { type: 'string' },
      duration: { type: 'string' },
      'drain-timeout': { type: 'string' },
      restarts: { type: 'string', default: 'broker,postgres' },
      'max-attempts': { type: 'string', default: '3' },
      'handler-delay': { type: 'string', default: '4' },
      // For a Postgres that is not the project's own (DATABASE_URL pointing elsewhere): how to restart it.
      'pg-restart-cmd': { type: 'string' },
      keep: { type: 'boolean', default: false },
      // The pipeline's own sizes (docs/torture.md, "The pipeline").
      'pipeline-messages': { type: 'string' },
      'pipeline-kills': { type: 'string' },
      'pipeline-duration': { type: 'string' },
      // The harness's self-test (hidden): consumers that write the effect outside the inbox transaction.
      break: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
}
try {
  args = parse();
} catch (e) {
  fail((e as Error).message);
}
const v = args.values;
if (v.help) {
  process.stdout.write(
    'npm run torture -- [--transport kafka,rabbitmq,sqs,nats,pipeline] [--messages N] [--kills N] [--seed N] [--consumers N]\n' +
      '                   [--kafka-mode mixed|message|batch] [--kafka-client kafkajs,platformatic] [--duration S] [--drain-timeout S] [--restarts broker,postgres|none]\n' +
      '                   [--pg-outage S] [--max-attempts N] [--keep] [--quick]\n' +
      '                   [--pipeline-messages N] [--pipeline-kills N] [--pipeline-duration S]\n' +
      'See docs/torture.md.\n',
  );
  process.exit(0);
}

function count(name: string, value: string | undefined, fallback: number, min = 0): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) fail(`--${name} must be an integer ≥ ${min}, got ${value}`);
  return n;
}

// `pipeline` (part of `all`) is the outbox pipeline of docs/torture.md, run after the transports.
const selected = v.transport === 'all' ? [...TRANSPORTS, 'pipeline'] : v.transport.split(',');
const pipeline = selected.includes('pipeline');
const transports: TransportName[] = selected
  .filter((t) => t !== 'pipeline')
  .map((t) => {
    if (!TRANSPORTS.includes(t as TransportName))
      fail(`--transport must be kafka, rabbitmq, sqs, nats, pipeline or all, got ${t}`);
    return t as TransportName;
  });
const restarts = v.restarts === 'none' ? [] : v.restarts.split(',');
for (const r of restarts)
  if (r !== 'broker' && r !== 'postgres') fail(`--restarts takes broker, postgres or none, got ${r}`);
const seed = count('seed', v.seed, randomSeed());
const messages = count('messages', v.messages, v.quick ? 1_000 : 10_000, 1);
const kills = count('kills', v.kills, v.quick ? 6 : 20);
const KAFKA_MODES = ['mixed', 'message', 'batch'] as const;
const kafkaMode =
  KAFKA_MODES.find((m) => m === v['kafka-mode']) ??
  fail(`--kafka-mode must be mixed, message or batch, got ${v['kafka-mode']}`);
const kafkaClients = [...new Set(v['kafka-client'].split(',').map((c) => c.trim()))].map((c) =>
  KAFKA_TORTURE_CLIENTS.includes(c as KafkaTortureClient)
    ? (c as KafkaTortureClient)
    : fail(`--kafka-client takes kafkajs, platformatic or both (comma-separated), got ${c}`),
);

const pipelineMessages = count('pipeline-messages', v['pipeline-messages'], v.quick ? 600 : 4_000, 1);
const pipelineKills = count('pipeline-kills', v['pipeline-kills'], v.quick ? 6 : 18);
const pipelineDuration = count('pipeline-duration', v['pipeline-duration'], v.quick ? 20 : 60, 5);

const options = {
  transports,
  messages,
  kills,
  ...(v.consumers !== undefined ? { consumers: count('consumers', v.consumers, 0, 1) } : {}),
  kafkaMode,
  kafkaClients,
  postgresOutageMs: count('pg-outage', v['pg-outage'], v.quick ? 3 : 5) * 1_000,
  seed,
  durationSeconds: count('duration', v.duration, v.quick ? 25 : Math.max(60, kills * 4), 5),
  drainTimeoutSeconds: count('drain-timeout', v['drain-timeout'], v.quick ? 120 : 300, 10),
  restartBroker: restarts.includes('broker'),
  restartPostgres: restarts.includes('postgres'),
  broken: v.break,
  maxAttempts: count('max-attempts', v['max-attempts'], 3, 1),
  handlerDelayMs: count('handler-delay', v['handler-delay'], 4),
  keep: v.keep ? ('always' as const) : ('on-failure' as const),
  ...(v['pg-restart-cmd'] !== undefined ? { postgresRestartCommand: v['pg-restart-cmd'] } : {}),
  log: (line: string) => process.stderr.write(`${line}\n`),
};

const reproduce = [
  'npm run torture --',
  `--seed ${seed}`,
  `--transport ${selected.join(',')}`,
  `--messages ${messages}`,
  `--kills ${kills}`,
  ...(options.consumers !== undefined ? [`--consumers ${options.consumers}`] : []),
  ...(kafkaMode !== 'mixed' ? [`--kafka-mode ${kafkaMode}`] : []),
  `--kafka-client ${kafkaClients.join(',')}`,
  `--duration ${options.durationSeconds}`,
  `--restarts ${restarts.length > 0 ? restarts.join(',') : 'none'}`,
  `--pg-outage ${options.postgresOutageMs / 1_000}`,
  ...(pipeline
    ? [
        `--pipeline-messages ${pipelineMessages} --pipeline-kills ${pipelineKills} --pipeline-duration ${pipelineDuration}`,
      ]
    : []),
  `--max-attempts ${options.maxAttempts}`,
  ...(v['pg-restart-cmd'] !== undefined ? [`--pg-restart-cmd ${JSON.stringify(v['pg-restart-cmd'])}`] : []),
  ...(v.break ? ['--break'] : []),
].join(' ');
process.stderr.write(
  `torture: seed ${seed}; ${selected.join(', ')}; ${messages} messages each (${SHARES.duplicates * 100}% duplicate sends, ${SHARES.poison * 100}% poison), ` +
    `${kills} kills, ${options.consumers ?? 'default'} consumers, maxAttempts ${options.maxAttempts}${pipeline ? `; pipeline: ${pipelineMessages} messages, ${pipelineKills} kills over ${pipelineDuration} s` : ''}, restarts: ${restarts.join(' and ') || 'none'}${v.break ? '; BROKEN consumer (self-test)' : ''}\n`,
);

// Interrupted (Ctrl-C, a CI timeout): take the consumer processes down too, or they would go on consuming.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    killAllConsumers();
    process.stderr.write(
      `torture: ${signal}: consumers killed; the run's schema and topic/queues are left behind\n`,
    );
    process.exit(130);
  });
}
process.once('exit', killAllConsumers);

const reports = transports.length > 0 ? await runTorture(options) : [];
// The pipeline runs with its own sizes (--pipeline-messages, --pipeline-kills, --pipeline-duration).
const pipelineReport = pipeline
  ? await runPipeline({
      ...options,
      messages: pipelineMessages,
      kills: pipelineKills,
      durationSeconds: pipelineDuration,
      services: 2,
      relays: 2,
      sinks: 2,
    })
  : undefined;
const tables = [
  ...(reports.length > 0 ? [formatReport(reports)] : []),
  ...(pipelineReport !== undefined ? [formatPipelineReport(pipelineReport)] : []),
];
process.stdout.write(`\n${tables.join('\n\n')}\n\nseed ${seed} — reproduce with: ${reproduce}\n`);
const ok = reports.every(passed) && (pipelineReport === undefined || pipelinePassed(pipelineReport));
process.stdout.write(
  ok ? 'torture: the invariant holds on every transport\n' : 'torture: INVARIANT VIOLATED (see above)\n',
);
process.exit(ok ? 0 : 1);
