// One torture run per transport: plan the stream from the seed, create the run's schema (inbox + an effects
// table with no unique constraint) and topic/queues, start the consumer processes, produce at a steady pace
// while SIGKILLing consumers at seeded moments — each kill waits until its victim's effects are growing, so
// that it lands on a consumer with work in flight (a kill that found its victim idle is counted apart) — and
// restarting the broker and Postgres once, wait for quiescence, stop the consumers, and check the invariant
// from the effects table, the inbox and the DLQ.

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

import { migrateInbox } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

import { requireService, restartService, stopService } from '../support/services.js';
import type { Verdict } from './check-invariant.js';
import { checkInvariant } from './check-invariant.js';
import { ConsumerPool } from './consumer-pool.js';
import type { KafkaTortureClient, TransportName } from './consumer-settings.js';
import { planMessages } from './message-plan.js';
import type { PlannedMessage } from './message-plan.js';
import type { Random } from './prng.js';
import { seededRandom } from './prng.js';
import { kafkaRig } from './transports/kafka-rig.js';
import type { KafkaTortureMode } from './transports/kafka-rig.js';
import { rabbitmqRig } from './transports/rabbitmq-rig.js';
import { natsRig } from './transports/nats-rig.js';
import { sqsRig } from './transports/sqs-rig.js';
import type { TransportRig } from './transports/transport-rig.js';

export interface TortureOptions {
  readonly transports: readonly TransportName[];
  /** Messages sent per transport, duplicates included. */
  readonly messages: number;
  /** SIGKILLs per transport. */
  readonly kills: number;
  /** Consumer processes per transport. Default: 2 for Kafka (two group members), 3 for the others. */
  readonly consumers?: number;
  /**
   * Kafka consumers' mode: `mixed` alternates `message` and `batch` by slot (one of each with two members).
   * Default is `mixed`.
   */
  readonly kafkaMode?: KafkaTortureMode;
  /** The Kafka clients to run the Kafka torture on, one run each (same plan and chaos). Default kafkajs. */
  readonly kafkaClients?: readonly KafkaTortureClient[];
  readonly seed: number;
  /** The chaos window: production and kills are spread over it. */
  readonly durationSeconds: number;
  /** How long to wait for quiescence after the chaos window. */
  readonly drainTimeoutSeconds: number;
  readonly restartBroker: boolean;
  readonly restartPostgres: boolean;
  /**
   * How long Postgres stays down at its restart (stopped, then started after this long): long enough for every
   * consumer to meet the outage, retry and redeliver. Default is 0 (a plain restart).
   */
  readonly postgresOutageMs?: number;
  /**
   * How long a kill waits for its victim's effects to grow before it kills it anyway (counted idle): long enough
   * to outlast a broker restart, during which nothing grows. Default is 60,000 ms.
   */
  readonly busyWaitMs?: number;
  /**
   * A shell command that restarts Postgres, for a Postgres that is not the project's own (DATABASE_URL set to
   * a private server). Default: `services.sh restart postgres`.
   */
  readonly postgresRestartCommand?: string;
  /** The self-test: consumers with the effect outside the inbox transaction. */
  readonly broken: boolean;
  readonly maxAttempts: number;
  readonly handlerDelayMs: number;
  /** When to keep the run's schema for inspection: `on-failure` (the CLI's default) or `always` (--keep). */
  readonly keep: 'always' | 'on-failure' | 'never';
  readonly log: (line: string) => void;
}

// The AWS SDK's notice about Node 20 would otherwise repeat in every consumer's output.
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';

export const SHARES = { duplicates: 0.3, poison: 0.01, transient: 0.03 } as const;

export interface TransportReport {
  readonly transport: TransportName;
  /** The column's name: the transport, and for Kafka on @platformatic/kafka `kafka/platformatic`. */
  readonly label: string;
  readonly seed: number;
  readonly sent: number;
  readonly distinct: number;
  readonly plannedDuplicates: number;
  readonly resent: number;
  readonly deliveries: number;
  readonly duplicatesDelivered: number;
  readonly duplicatesSuppressed: number;
  readonly retries: number;
  readonly kills: number;
  /** Kills that found their victim's effects growing (work in flight), and those that waited in vain. */
  readonly busyKills: number;
  readonly idleKills: number;
  readonly consumers: number;
  readonly consumerStarts: number;
  readonly brokerRestart: string;
  readonly postgresRestart: string;
  readonly unexpectedExits: readonly string[];
  readonly quiescent: boolean;
  readonly backlogAtEnd: number | undefined;
  readonly seconds: number;
  readonly schema: string;
  readonly verdict: Verdict | undefined;
  /** Set when the run itself failed (setup, a service that never came back …). */
  readonly error: string | undefined;
}

function rigFor(
  name: TransportName,
  options: TortureOptions,
  log: (line: string) => void,
  kafkaClient: KafkaTortureClient,
): TransportRig {
  switch (name) {
    case 'kafka':
      return kafkaRig({ mode: options.kafkaMode ?? 'mixed', client: kafkaClient });
    case 'rabbitmq':
      return rabbitmqRig({ log });
    case 'sqs':
      return sqsRig({ maxAttempts: options.maxAttempts });
    case 'nats':
      return natsRig();
  }
}

interface ChaosEvent {
  readonly at: number;
  readonly kind: 'kill' | 'broker' | 'postgres';
  /** For kills: which ready consumer (a fraction of the ready list) and when to start it again. */
  readonly pick: number;
  readonly restartAfterMs: number;
}

/** Consumer processes per transport when `--consumers` is not given: Kafka runs a group of two members. */
export const DEFAULT_CONSUMERS: Readonly<Record<TransportName, number>> = {
  kafka: 2,
  rabbitmq: 3,
  sqs: 3,
  nats: 3,
};

/** Production is spread over this share of the chaos window; kills fall inside it, where work flows. */
const PRODUCTION_SHARE = 0.8;

/** Every moment of chaos, decided from the seed: kill times, victims, restart delays, the two restarts. */
function chaosSchedule(random: Random, options: TortureOptions): ChaosEvent[] {
  const window = options.durationSeconds * 1_000;
  const events: ChaosEvent[] = [];
  for (let k = 0; k < options.kills; k++) {
    events.push({
      at: window * (0.05 + (PRODUCTION_SHARE - 0.1) * random.next()),
      kind: 'kill',
      pick: random.next(),
      restartAfterMs: random.int(200, 2_500),
    });
  }
  if (options.restartBroker)
    events.push({ at: window * (0.3 + 0.15 * random.next()), kind: 'broker', pick: 0, restartAfterMs: 0 });
  if (options.restartPostgres)
    events.push({ at: window * (0.6 + 0.15 * random.next()), kind: 'postgres', pick: 0, restartAfterMs: 0 });
  return events.sort((a, b) => a.at - b.at);
}

export async function runTorture(options: TortureOptions): Promise<TransportReport[]> {
  const reports: TransportReport[] = [];
  for (const transport of options.transports) {
    const clients: readonly KafkaTortureClient[] =
      transport === 'kafka' ? (options.kafkaClients ?? ['kafkajs']) : ['kafkajs'];
    for (const client of clients) reports.push(await runOne(transport, options, client));
  }
  return reports;
}

async function runOne(
  transport: TransportName,
  options: TortureOptions,
  kafkaClient: KafkaTortureClient,
): Promise<TransportReport> {
  const started = Date.now();
  const label = transport === 'kafka' && kafkaClient !== 'kafkajs' ? `kafka/${kafkaClient}` : transport;
  const random = seededRandom(options.seed, transport);
  const log = (line: string): void =>
    options.log(`[${label} +${((Date.now() - started) / 1000).toFixed(1)}s] ${line}`);
  const plan = planMessages(random.fork('plan'), {
    messages: options.messages,
    duplicateShare: SHARES.duplicates,
    poisonShare: SHARES.poison,
    transientShare: SHARES.transient,
    prefix: `${transport}-${options.seed}`,
  });
  const schedule = chaosSchedule(random.fork('chaos'), options);
  const consumers = options.consumers ?? DEFAULT_CONSUMERS[transport];
  const databaseUrl = requireService('postgres').url;
  const schema = `torture_${transport}_${randomBytes(4).toString('hex')}`;
  // Bounded waits: while Postgres is down, a query must fail, not hang (the kill loop polls through it).
  const dbPool = new pg.Pool({
    connectionString: databaseUrl,
    max: 3,
    connectionTimeoutMillis: 5_000,
    query_timeout: 10_000,
  });
  dbPool.on('error', () => undefined);
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: dbPool }) });
  const rig = rigFor(transport, options, log, kafkaClient);
  const consumerName = `torture-${transport}`;
  const logDir = join(tmpdir(), `inboxkit-torture-${schema}`);
  const pool = new ConsumerPool({
    count: consumers,
    log,
    logDir,
    settings: (index) => ({
      transport,
      index,
      consumerName,
      databaseUrl,
      schema,
      poolSize: 12,
      maxAttempts: options.maxAttempts,
      handlerDelayMs: options.handlerDelayMs,
      broken: options.broken,
      ...rig.consumerSettings(index),
    }),
  });
  let brokerRestart = options.restartBroker ? 'not reached' : 'off';
  let postgresRestart = options.restartPostgres ? 'not reached' : 'off';
  let quiescent = false;
  let backlogAtEnd: number | undefined;
  let verdict: Verdict | undefined;
  let error: string | undefined;
  let keep = options.keep === 'always';
  const kills = { busy: 0, idle: 0 };
  try {
    log(
      `seed ${options.seed}: ${plan.sends.length} sends, ${plan.kinds.size} distinct ids, ${plan.poison.size} poison, ${consumers} consumers, maxAttempts ${options.maxAttempts}, schema ${schema}, consumer logs in ${logDir}`,
    );
    await migrateInbox(db, { schema });
    await dbPool.query(
      `CREATE TABLE "${schema}".effects (seq bigserial PRIMARY KEY, message_id text NOT NULL, pid integer, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
    );
    await dbPool.query(`CREATE INDEX ON "${schema}".effects (message_id)`);
    await dbPool.query(`CREATE INDEX ON "${schema}".effects (pid)`);
    await rig.setup();
    await pool.startAll();
    log(`${consumers} consumers ready; chaos for ${options.durationSeconds} s`);

    const t0 = Date.now();
    const background: Promise<void>[] = [];
    const spreadMs = options.durationSeconds * 1_000 * PRODUCTION_SHARE;
    const killTimes = schedule.filter((e) => e.kind === 'kill').map((e) => e.at);
    let killsDone = 0;
    // Production keeps pace with the kills: a kill waits for its victim to be busy, and a Kafka group needs
    // seconds to rebalance after each, so the kills can fall behind their schedule. Were the sends to go on
    // regardless, the stream would be consumed before the last kills and those would find idle consumers.
    const producing = produce(rig, plan.sends, t0, spreadMs, log, async (fraction) => {
      const due = killTimes.filter((at) => at <= fraction * spreadMs).length - 1;
      while (killsDone < due) await sleep(100);
    });
    for (const event of schedule) {
      const wait = t0 + event.at - Date.now();
      if (wait > 0) await sleep(wait);
      if (event.kind === 'kill') {
        const chosen = await chooseBusyVictim(pool, dbPool, schema, event.pick, options.busyWaitMs ?? 60_000);
        if (chosen.busy) kills.busy += 1;
        else kills.idle += 1;
        log(
          `SIGKILL consumer ${chosen.victim} (${chosen.busy ? `busy: its effects grew, after waiting ${chosen.waitedMs} ms` : `IDLE: its effects did not grow within ${chosen.waitedMs} ms`}; start again in ${event.restartAfterMs} ms)`,
        );
        await pool.kill(chosen.victim, event.restartAfterMs);
        killsDone += 1;
      } else if (event.kind === 'broker') {
        log(`broker restart: ${rig.restartLabel}`);
        const t = Date.now();
        background.push(
          rig.restartBroker().then(
            (what) => {
              brokerRestart = `${rig.restartLabel} (${((Date.now() - t) / 1000).toFixed(1)} s)`;
              log(`broker back: ${what}`);
            },
            (e: unknown) => {
              brokerRestart = `failed: ${(e as Error).message}`;
              throw e;
            },
          ),
        );
      } else {
        const outage = options.postgresOutageMs ?? 0;
        log(
          `Postgres restart (${options.postgresRestartCommand ?? 'services.sh restart postgres'}${outage > 0 && options.postgresRestartCommand === undefined ? `, down for ${outage} ms` : ''})`,
        );
        const t = Date.now();
        background.push(
          restartPostgres(options.postgresRestartCommand, outage).then(
            () => {
              postgresRestart = `restarted (${((Date.now() - t) / 1000).toFixed(1)} s)`;
              log('Postgres back');
            },
            (e: unknown) => {
              postgresRestart = `failed: ${(e as Error).message}`;
              throw e;
            },
          ),
        );
      }
    }
    await producing;
    await Promise.all(background);
    log(`chaos over (${pool.kills} kills); every consumer running again, waiting for quiescence`);
    await pool.ensureAllRunning();

    const deadline = Date.now() + options.drainTimeoutSeconds * 1_000;
    let calm = 0;
    let last = '';
    while (Date.now() < deadline) {
      const progress = await drainProgress(dbPool, schema, consumerName).catch(() => undefined);
      const backlog = await rig.backlog();
      backlogAtEnd = backlog;
      // Settled one way or the other: a healthy id dead-lettered by mistake will never be applied, and waiting
      // for it would only delay the verdict that reports it.
      const done =
        progress !== undefined &&
        progress.applied + progress.deadLettered >= plan.good.size + plan.poison.size &&
        progress.deadLettered >= plan.poison.size &&
        backlog === 0;
      calm = done ? calm + 1 : 0;
      const line = `applied ${progress?.applied ?? '?'}/${plan.good.size}, dead-lettered ${progress?.deadLettered ?? '?'}/${plan.poison.size}, broker backlog ${backlog ?? '?'}`;
      if (line !== last) log(line);
      last = line;
      if (calm >= 3) {
        quiescent = true;
        break;
      }
      await sleep(1_000);
    }
    if (!quiescent) log(`not quiescent after ${options.drainTimeoutSeconds} s: checking what there is`);
    await pool.stopAll();

    const evidence = await gatherEvidence(dbPool, schema, consumerName);
    const deadLetters = await rig.readDeadLetters();
    verdict = checkInvariant(plan, { ...evidence, deadLetters });
    if (verdict.violations.length > 0 && options.keep !== 'never') keep = true;
  } catch (e) {
    error = (e as Error).stack ?? String(e);
    keep = options.keep !== 'never';
    log(`run failed: ${(e as Error).message}`);
    await pool.stopAll(10_000).catch(() => undefined);
  } finally {
    await rig.teardown().catch(() => undefined);
    if (!keep) await dbPool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    else log(`kept schema ${schema} for inspection`);
    await db.destroy().catch(() => undefined);
  }
  const tally = pool.tally;
  return {
    transport,
    label,
    seed: options.seed,
    sent: plan.sends.length,
    distinct: plan.kinds.size,
    plannedDuplicates: plan.duplicateSends,
    resent: rig.resent,
    deliveries: tally.deliveries,
    duplicatesDelivered: tally.duplicateDeliveries,
    duplicatesSuppressed: tally.byStatus.duplicate,
    retries: tally.byStatus.retry,
    kills: pool.kills,
    busyKills: kills.busy,
    idleKills: kills.idle,
    consumers,
    consumerStarts: pool.starts,
    brokerRestart,
    postgresRestart,
    unexpectedExits: pool.unexpectedExits,
    quiescent,
    backlogAtEnd,
    seconds: (Date.now() - started) / 1000,
    schema,
    verdict,
    error,
  };
}

/**
 * Restarts the test Postgres (services.sh) — stopped for `outageMs` first when given — or runs `command` when
 * the run was given one.
 */
export async function restartPostgres(command: string | undefined, outageMs = 0): Promise<void> {
  if (command === undefined) {
    if (outageMs > 0) {
      await stopService('postgres');
      await sleep(outageMs);
    }
    return restartService('postgres', { timeoutMs: 240_000 });
  }
  await promisify(execFile)('bash', ['-c', command], { timeout: 240_000 });
}

/**
 * Picks the victim of a kill among the consumers that are up (`pick`, a fraction of the list, from the seed)
 * and waits until its effects are growing — rows it committed in the effects table, by pid, more than a moment
 * ago — so that the kill lands on work in flight. After `maxWaitMs` it is killed anyway, reported idle.
 */
async function chooseBusyVictim(
  pool: ConsumerPool,
  db: pg.Pool,
  schema: string,
  pick: number,
  maxWaitMs: number,
): Promise<{ victim: number; busy: boolean; waitedMs: number }> {
  const started = Date.now();
  const effectsOf = async (pid: number): Promise<number | undefined> => {
    try {
      const { rows } = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".effects WHERE pid = $1`,
        [pid],
      );
      return rows[0]!.n;
    } catch {
      return undefined; // Postgres restarting: no evidence either way
    }
  };
  let victim: number | undefined;
  let pid: number | undefined;
  let seen: number | undefined;
  for (;;) {
    await pool.waitUntil(() => pool.readyIndexes().length > 0, 120_000, 'a ready consumer to kill');
    const ready = pool.readyIndexes();
    if (victim === undefined || !ready.includes(victim) || pool.pidOf(victim) !== pid) {
      victim = ready[Math.floor(pick * ready.length)]!;
      pid = pool.pidOf(victim);
      seen = undefined;
    }
    const count = pid === undefined ? undefined : await effectsOf(pid);
    if (count !== undefined && seen !== undefined && count > seen)
      return { victim, busy: true, waitedMs: Date.now() - started };
    if (count !== undefined) seen = count;
    if (Date.now() - started >= maxWaitMs) return { victim, busy: false, waitedMs: Date.now() - started };
    await sleep(150);
  }
}

/**
 * Sends the planned stream in chunks of 20, spread evenly over `spreadMs` (catching up after an outage).
 * `gate(fraction)`, when given, is awaited before each chunk: the harness holds production back with it.
 */
export async function produce(
  rig: TransportRig,
  sends: readonly PlannedMessage[],
  t0: number,
  spreadMs: number,
  log: (l: string) => void,
  gate?: (fraction: number) => Promise<void>,
): Promise<void> {
  const chunk = 20;
  for (let i = 0; i < sends.length; i += chunk) {
    const due = t0 + (i / sends.length) * spreadMs;
    const wait = due - Date.now();
    if (wait > 0) await sleep(wait);
    await gate?.(i / sends.length);
    await rig.send(sends.slice(i, i + chunk));
  }
  log(
    `all ${sends.length} messages sent${rig.resent > 0 ? ` (${rig.resent} sent again after unconfirmed sends)` : ''}`,
  );
}

async function drainProgress(
  pool: pg.Pool,
  schema: string,
  consumer: string,
): Promise<{ applied: number; deadLettered: number }> {
  const { rows } = await pool.query<{ applied: number; dead: number }>(
    `SELECT (SELECT count(DISTINCT message_id)::int FROM "${schema}".effects) AS applied,
            (SELECT count(*)::int FROM "${schema}".inbox WHERE consumer = $1 AND status = 'dead_lettered') AS dead`,
    [consumer],
  );
  return { applied: rows[0]!.applied, deadLettered: rows[0]!.dead };
}

async function gatherEvidence(
  pool: pg.Pool,
  schema: string,
  consumer: string,
): Promise<{ effects: Map<string, number>; inbox: Map<string, { status: string; reason: string | null }> }> {
  const effects = new Map<string, number>();
  const e = await pool.query<{ message_id: string; n: number }>(
    `SELECT message_id, count(*)::int AS n FROM "${schema}".effects GROUP BY message_id`,
  );
  for (const row of e.rows) effects.set(row.message_id, row.n);
  const inbox = new Map<string, { status: string; reason: string | null }>();
  const i = await pool.query<{ message_id: string; status: string; dead_letter_reason: string | null }>(
    `SELECT h.message_id, h.status, d.dead_letter_reason FROM "${schema}".inbox h
       LEFT JOIN "${schema}".inbox_details d ON d.consumer = h.consumer AND d.message_id = h.message_id WHERE h.consumer = $1`,
    [consumer],
  );
  for (const row of i.rows) inbox.set(row.message_id, { status: row.status, reason: row.dead_letter_reason });
  return { effects, inbox };
}
