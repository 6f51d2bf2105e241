// `npm run torture` / `npm run torture:quick`: the chaos harness of docs/torture.md. Exits 1 when the
// invariant is violated on any transport (or a run fails), 2 on bad arguments.
//
//   npm run torture -- [--transport kafka,rabbitmq,sqs] [--messages 10000] [--kills 20] [--seed N]
//                      [--consumers 3] [--duration 90] [--drain-timeout 300] [--restarts broker,postgres|none]
//                      [--max-attempts 5] [--keep] [--quick]

import { parseArgs } from 'node:util';

import { killAllConsumers } from './consumer-pool.js';
import type { TransportName } from './consumer-settings.js';
import { TRANSPORTS } from './consumer-settings.js';
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
      consumers: { type: 'string', default: '3' },
      duration: { type: 'string' },
      'drain-timeout': { type: 'string' },
      restarts: { type: 'string', default: 'broker,postgres' },
      'max-attempts': { type: 'string', default: '5' },
      'handler-delay': { type: 'string', default: '4' },
      // For a Postgres that is not the project's own (DATABASE_URL pointing elsewhere): how to restart it.
      'pg-restart-cmd': { type: 'string' },
      keep: { type: 'boolean', default: false },
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
    'npm run torture -- [--transport kafka,rabbitmq,sqs] [--messages N] [--kills N] [--seed N] [--consumers N]\n' +
      '                   [--duration S] [--drain-timeout S] [--restarts broker,postgres|none] [--max-attempts N] [--keep] [--quick]\n' +
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

const transports: TransportName[] =
  v.transport === 'all'
    ? [...TRANSPORTS]
    : v.transport.split(',').map((t) => {
        if (!TRANSPORTS.includes(t as TransportName))
          fail(`--transport must be kafka, rabbitmq, sqs or all, got ${t}`);
        return t as TransportName;
      });
const restarts = v.restarts === 'none' ? [] : v.restarts.split(',');
for (const r of restarts)
  if (r !== 'broker' && r !== 'postgres') fail(`--restarts takes broker, postgres or none, got ${r}`);
const seed = count('seed', v.seed, randomSeed());
const messages = count('messages', v.messages, v.quick ? 1_000 : 10_000, 1);
const kills = count('kills', v.kills, v.quick ? 4 : 20);

const options = {
  transports,
  messages,
  kills,
  consumers: count('consumers', v.consumers, 3, 1),
  seed,
  durationSeconds: count('duration', v.duration, v.quick ? 25 : Math.max(60, kills * 4), 5),
  drainTimeoutSeconds: count('drain-timeout', v['drain-timeout'], v.quick ? 120 : 300, 10),
  restartBroker: restarts.includes('broker'),
  restartPostgres: restarts.includes('postgres'),
  broken: v.break,
  maxAttempts: count('max-attempts', v['max-attempts'], 5, 1),
  handlerDelayMs: count('handler-delay', v['handler-delay'], 4),
  keep: v.keep ? ('always' as const) : ('on-failure' as const),
  ...(v['pg-restart-cmd'] !== undefined ? { postgresRestartCommand: v['pg-restart-cmd'] } : {}),
  log: (line: string) => process.stderr.write(`${line}\n`),
};

const reproduce = [
  'npm run torture --',
  `--seed ${seed}`,
  `--transport ${transports.join(',')}`,
  `--messages ${messages}`,
  `--kills ${kills}`,
  `--consumers ${options.consumers}`,
  `--duration ${options.durationSeconds}`,
  `--restarts ${restarts.length > 0 ? restarts.join(',') : 'none'}`,
  ...(options.maxAttempts !== 5 ? [`--max-attempts ${options.maxAttempts}`] : []),
  ...(v['pg-restart-cmd'] !== undefined ? [`--pg-restart-cmd ${JSON.stringify(v['pg-restart-cmd'])}`] : []),
  ...(v.break ? ['--break'] : []),
].join(' ');
process.stderr.write(
  `torture: seed ${seed}; ${transports.join(', ')}; ${messages} messages each (${SHARES.duplicates * 100}% duplicate sends, ${SHARES.poison * 100}% poison), ` +
    `${kills} kills, ${options.consumers} consumers, restarts: ${restarts.join(' and ') || 'none'}${v.break ? '; BROKEN consumer (self-test)' : ''}\n`,
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

const reports = await runTorture(options);
process.stdout.write(`\n${formatReport(reports)}\n\nseed ${seed} — reproduce with: ${reproduce}\n`);
const ok = reports.every(passed);
process.stdout.write(
  ok ? 'torture: the invariant holds on every transport\n' : 'torture: INVARIANT VIOLATED (see above)\n',
);
process.exit(ok ? 0 : 1);
