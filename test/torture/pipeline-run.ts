// The pipeline torture (docs/torture.md, "The pipeline"): source RabbitMQ queue → service processes (inbox +
// context.outbox: an effect row and the outgoing message in one transaction) → relay processes
// (startOutboxRelay → Kafka) → destination topic → sink processes (consumer-process.ts with its own inbox and
// effects table). Produces the seeded stream while SIGKILLing services, relays and sinks in turn (each started
// again), optionally restarts the destination broker and Postgres, waits for quiescence, stops everything, and
// checks that every good source id took effect exactly once at the sink.

import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import { migrateInbox } from '@inboxkit/core/postgres';
import { migrateOutbox } from '@inboxkit/outbox';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

import { requireService } from '../support/services.js';
import type { InboxState } from './check-invariant.js';
import { ConsumerPool } from './consumer-pool.js';
import type { ConsumerSettings } from './consumer-settings.js';
import { planMessages } from './message-plan.js';
import type { PipelineVerdict } from './pipeline-check.js';
import { checkPipeline } from './pipeline-check.js';
import type { PipelineRelaySettings, PipelineServiceSettings } from './pipeline-settings.js';
import { seededRandom } from './prng.js';
import type { TortureOptions } from './run-torture.js';
import { produce, restartPostgres, SHARES } from './run-torture.js';
import { kafkaRig } from './transports/kafka-rig.js';
import { rabbitmqRig } from './transports/rabbitmq-rig.js';
import type { TransportRig } from './transports/transport-rig.js';

const SERVICE_ENTRY = fileURLToPath(new URL('./pipeline-service-process.ts', import.meta.url));
const RELAY_ENTRY = fileURLToPath(new URL('./pipeline-relay-process.ts', import.meta.url));

export type PipelineRole = 'service' | 'relay' | 'sink';
const ROLES: readonly PipelineRole[] = ['service', 'relay', 'sink'];

export interface PipelineOptions extends Omit<TortureOptions, 'transports' | 'consumers'> {
  /** Processes per role. */
  readonly services: number;
  readonly relays: number;
  readonly sinks: number;
}

export interface PipelineReport {
  readonly seed: number;
  readonly sent: number;
  readonly resent: number;
  readonly distinct: number;
  readonly plannedDuplicates: number;
  readonly serviceDeliveries: number;
  readonly serviceDuplicatesSuppressed: number;
  readonly sinkDeliveries: number;
  readonly sinkDuplicatesDelivered: number;
  readonly sinkDuplicatesSuppressed: number;
  readonly kills: Readonly<Record<PipelineRole, number>>;
  readonly starts: number;
  readonly unexpectedExits: readonly string[];
  readonly brokerRestart: string;
  readonly postgresRestart: string;
  readonly quiescent: boolean;
  readonly backlogAtEnd: string;
  readonly seconds: number;
  readonly schema: string;
  readonly verdict: PipelineVerdict | undefined;
  readonly error: string | undefined;
}

interface ChaosEvent {
  readonly at: number;
  readonly kind: PipelineRole | 'broker' | 'postgres';
  readonly pick: number;
  readonly restartAfterMs: number;
}

/** Kills take the three roles in turn (from a seeded start), at seeded moments; then the two restarts. */
function chaosSchedule(random: ReturnType<typeof seededRandom>, options: PipelineOptions): ChaosEvent[] {
  const window = options.durationSeconds * 1_000;
  const events: ChaosEvent[] = [];
  const first = random.int(0, 2);
  for (let k = 0; k < options.kills; k++) {
    events.push({
      at: window * (0.05 + 0.9 * random.next()),
      kind: ROLES[(first + k) % 3]!,
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

export async function runPipeline(options: PipelineOptions): Promise<PipelineReport> {
  const started = Date.now();
  const random = seededRandom(options.seed, 'pipeline');
  const log = (line: string): void =>
    options.log(`[pipeline +${((Date.now() - started) / 1000).toFixed(1)}s] ${line}`);
  const plan = planMessages(random.fork('plan'), {
    messages: options.messages,
    duplicateShare: SHARES.duplicates,
    poisonShare: SHARES.poison,
    transientShare: SHARES.transient,
    prefix: `pipeline-${options.seed}`,
  });
  const schedule = chaosSchedule(random.fork('chaos'), options);
  const databaseUrl = requireService('postgres').url;
  const brokers = requireService('kafka').brokers;
  const schema = `torture_pipeline_${randomBytes(4).toString('hex')}`;
  const sinkSchema = `${schema}_sink`;
  const dbPool = new pg.Pool({ connectionString: databaseUrl, max: 3 });
  dbPool.on('error', () => undefined);
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: dbPool }) });
  const source: TransportRig = rabbitmqRig({ log });
  const destination: TransportRig = kafkaRig();
  const serviceName = 'pipeline-service';
  const sinkName = 'pipeline-sink';
  const logDir = join(tmpdir(), `inboxkit-torture-${schema}`);
  const common = (index: number): Omit<ConsumerSettings, 'transport'> => ({
    index,
    consumerName: serviceName,
    databaseUrl,
    schema,
    poolSize: 8,
    maxAttempts: options.maxAttempts,
    handlerDelayMs: options.handlerDelayMs,
    broken: options.broken,
  });
  const sinkTopic = () => destination.consumerSettings(0).kafka!.topic;
  const pools: Record<PipelineRole, ConsumerPool> = {
    service: new ConsumerPool({
      count: options.services,
      log,
      logDir,
      role: 'service',
      entry: SERVICE_ENTRY,
      settings: (index): PipelineServiceSettings => ({
        ...common(index),
        transport: 'rabbitmq',
        ...source.consumerSettings(index),
        sinkTopic: sinkTopic(),
        kafkaBrokers: brokers,
      }),
    }),
    relay: new ConsumerPool({
      count: options.relays,
      log,
      logDir,
      role: 'relay',
      entry: RELAY_ENTRY,
      settings: (index): PipelineRelaySettings => ({
        ...common(index),
        consumerName: 'pipeline-relay',
        poolSize: 4,
        transport: 'kafka',
        kafkaBrokers: brokers,
        batchSize: 100,
        rowsPerKey: 10,
        concurrency: 2,
      }),
    }),
    sink: new ConsumerPool({
      count: options.sinks,
      log,
      logDir,
      role: 'sink',
      settings: (index) => ({
        ...common(index),
        consumerName: sinkName,
        schema: sinkSchema,
        broken: false,
        transport: 'kafka',
        ...destination.consumerSettings(index),
      }),
    }),
  };
  const all = Object.values(pools);
  const kills: Record<PipelineRole, number> = { service: 0, relay: 0, sink: 0 };
  let brokerRestart = options.restartBroker ? 'not reached' : 'off';
  let postgresRestart = options.restartPostgres ? 'not reached' : 'off';
  let quiescent = false;
  let backlogAtEnd = '';
  let verdict: PipelineVerdict | undefined;
  let error: string | undefined;
  let keep = options.keep === 'always';
  try {
    log(
      `seed ${options.seed}: ${plan.sends.length} sends, ${plan.kinds.size} distinct ids, ${plan.poison.size} poison; schemas ${schema} (service, outbox) and ${sinkSchema} (sink); logs in ${logDir}`,
    );
    await migrateInbox(db, { schema });
    await migrateOutbox(db, { schema });
    await migrateInbox(db, { schema: sinkSchema });
    for (const s of [schema, sinkSchema]) {
      await dbPool.query(
        `CREATE TABLE "${s}".effects (seq bigserial PRIMARY KEY, message_id text NOT NULL, pid integer, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
      );
      await dbPool.query(`CREATE INDEX ON "${s}".effects (message_id)`);
    }
    await source.setup();
    await destination.setup();
    await Promise.all(all.map((p) => p.startAll()));
    log(
      `${options.services} services, ${options.relays} relays, ${options.sinks} sinks ready; chaos for ${options.durationSeconds} s`,
    );

    const t0 = Date.now();
    const background: Promise<void>[] = [];
    const producing = produce(source, plan.sends, t0, options.durationSeconds * 800, log);
    for (const event of schedule) {
      const wait = t0 + event.at - Date.now();
      if (wait > 0) await sleep(wait);
      if (event.kind === 'broker') {
        log(`broker restart: ${destination.restartLabel} (the destination)`);
        const t = Date.now();
        background.push(
          destination.restartBroker().then(
            () => {
              brokerRestart = `${destination.restartLabel} (${((Date.now() - t) / 1000).toFixed(1)} s)`;
              log('destination broker back');
            },
            (e: unknown) => {
              brokerRestart = `failed: ${(e as Error).message}`;
              throw e;
            },
          ),
        );
      } else if (event.kind === 'postgres') {
        log(`Postgres restart (${options.postgresRestartCommand ?? 'services.sh restart postgres'})`);
        const t = Date.now();
        background.push(
          restartPostgres(options.postgresRestartCommand).then(
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
      } else {
        const pool = pools[event.kind];
        await pool.waitUntil(() => pool.readyIndexes().length > 0, 60_000, `a ready ${event.kind} to kill`);
        const ready = pool.readyIndexes();
        const victim = ready[Math.floor(event.pick * ready.length)]!;
        log(`SIGKILL ${event.kind} ${victim} (start again in ${event.restartAfterMs} ms)`);
        await pool.kill(victim, event.restartAfterMs);
        kills[event.kind] += 1;
      }
    }
    await producing;
    await Promise.all(background);
    log(
      `chaos over (${kills.service + kills.relay + kills.sink} kills); every process running again, waiting for quiescence`,
    );
    await Promise.all(all.map((p) => p.ensureAllRunning()));

    const deadline = Date.now() + options.drainTimeoutSeconds * 1_000;
    let calm = 0;
    let last = '';
    while (Date.now() < deadline) {
      const progress = await drainProgress(dbPool, schema, sinkSchema, serviceName).catch(() => undefined);
      const [sourceBacklog, sinkBacklog] = await Promise.all([source.backlog(), destination.backlog()]);
      backlogAtEnd = `source ${sourceBacklog ?? '?'}, outbox ${progress?.undispatched ?? '?'}, destination ${sinkBacklog ?? '?'}`;
      const done =
        progress !== undefined &&
        progress.serviceApplied >= plan.good.size &&
        progress.deadLettered >= plan.poison.size &&
        progress.undispatched === 0 &&
        progress.sinkApplied >= plan.good.size &&
        sourceBacklog === 0 &&
        sinkBacklog === 0;
      calm = done ? calm + 1 : 0;
      const line = `service applied ${progress?.serviceApplied ?? '?'}/${plan.good.size}, dead-lettered ${progress?.deadLettered ?? '?'}/${plan.poison.size}, sink applied ${progress?.sinkApplied ?? '?'}/${plan.good.size}; backlog ${backlogAtEnd}`;
      if (line !== last) log(line);
      last = line;
      if (calm >= 3) {
        quiescent = true;
        break;
      }
      await sleep(1_000);
    }
    if (!quiescent) log(`not quiescent after ${options.drainTimeoutSeconds} s: checking what there is`);
    await Promise.all(all.map((p) => p.stopAll()));

    const [serviceEvidence, sinkEvidence, outbox, sourceDlq, sinkDlq] = await Promise.all([
      gatherEvidence(dbPool, schema, serviceName),
      gatherEvidence(dbPool, sinkSchema, sinkName),
      outboxState(dbPool, schema),
      source.readDeadLetters(),
      destination.readDeadLetters(),
    ]);
    verdict = checkPipeline(plan, serviceName, {
      service: { ...serviceEvidence, deadLetters: sourceDlq },
      outbox,
      sink: { ...sinkEvidence, deadLetters: sinkDlq },
    });
    if (verdict.violations.length > 0 && options.keep !== 'never') keep = true;
  } catch (e) {
    error = (e as Error).stack ?? String(e);
    keep = options.keep !== 'never';
    log(`run failed: ${(e as Error).message}`);
    await Promise.all(all.map((p) => p.stopAll(10_000).catch(() => undefined)));
  } finally {
    await source.teardown().catch(() => undefined);
    await destination.teardown().catch(() => undefined);
    if (!keep) {
      for (const s of [schema, sinkSchema])
        await dbPool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
    } else log(`kept schemas ${schema} and ${sinkSchema} for inspection`);
    await db.destroy().catch(() => undefined);
  }
  return {
    seed: options.seed,
    sent: plan.sends.length,
    resent: source.resent,
    distinct: plan.kinds.size,
    plannedDuplicates: plan.duplicateSends,
    serviceDeliveries: pools.service.tally.deliveries,
    serviceDuplicatesSuppressed: pools.service.tally.byStatus.duplicate,
    sinkDeliveries: pools.sink.tally.deliveries,
    sinkDuplicatesDelivered: pools.sink.tally.duplicateDeliveries,
    sinkDuplicatesSuppressed: pools.sink.tally.byStatus.duplicate,
    kills,
    starts: all.reduce((n, p) => n + p.starts, 0),
    unexpectedExits: ROLES.flatMap((role) => pools[role].unexpectedExits.map((e) => `${role}: ${e}`)),
    brokerRestart,
    postgresRestart,
    quiescent,
    backlogAtEnd,
    seconds: (Date.now() - started) / 1000,
    schema,
    verdict,
    error,
  };
}

async function drainProgress(
  pool: pg.Pool,
  schema: string,
  sinkSchema: string,
  service: string,
): Promise<{ serviceApplied: number; deadLettered: number; undispatched: number; sinkApplied: number }> {
  const { rows } = await pool.query<{ applied: number; dead: number; undispatched: number; sink: number }>(
    `SELECT (SELECT count(DISTINCT message_id)::int FROM "${schema}".effects) AS applied,
            (SELECT count(*)::int FROM "${schema}".inbox WHERE consumer = $1 AND status = 'dead_lettered') AS dead,
            (SELECT count(*)::int FROM "${schema}".outbox WHERE dispatched_at IS NULL AND parked_at IS NULL) AS undispatched,
            (SELECT count(DISTINCT message_id)::int FROM "${sinkSchema}".effects) AS sink`,
    [service],
  );
  const r = rows[0]!;
  return {
    serviceApplied: r.applied,
    deadLettered: r.dead,
    undispatched: r.undispatched,
    sinkApplied: r.sink,
  };
}

async function gatherEvidence(
  pool: pg.Pool,
  schema: string,
  consumer: string,
): Promise<{ effects: Map<string, number>; inbox: Map<string, InboxState> }> {
  const effects = new Map<string, number>();
  const e = await pool.query<{ message_id: string; n: number }>(
    `SELECT message_id, count(*)::int AS n FROM "${schema}".effects GROUP BY message_id`,
  );
  for (const row of e.rows) effects.set(row.message_id, row.n);
  const inbox = new Map<string, InboxState>();
  const i = await pool.query<{ message_id: string; status: string; dead_letter_reason: string | null }>(
    `SELECT h.message_id, h.status, d.dead_letter_reason FROM "${schema}".inbox h
       LEFT JOIN "${schema}".inbox_details d ON d.consumer = h.consumer AND d.message_id = h.message_id WHERE h.consumer = $1`,
    [consumer],
  );
  for (const row of i.rows) inbox.set(row.message_id, { status: row.status, reason: row.dead_letter_reason });
  return { effects, inbox };
}

async function outboxState(
  pool: pg.Pool,
  schema: string,
): Promise<{ rows: number; undispatched: number; parked: number }> {
  const { rows } = await pool.query<{ rows: number; undispatched: number; parked: number }>(
    `SELECT count(*)::int AS rows,
            count(*) FILTER (WHERE dispatched_at IS NULL AND parked_at IS NULL)::int AS undispatched,
            count(*) FILTER (WHERE parked_at IS NOT NULL)::int AS parked
       FROM "${schema}".outbox`,
  );
  return rows[0]!;
}

function cell(value: string | number | undefined): string {
  if (value === undefined) return '—';
  return typeof value === 'number' ? value.toLocaleString('en-US') : value;
}

/** Whether the pipeline run holds: no violation and no failed run. */
export function pipelinePassed(report: PipelineReport): boolean {
  return report.error === undefined && report.verdict !== undefined && report.verdict.violations.length === 0;
}

/** The pipeline's table, in the transport table's style, then every violation in words. */
export function formatPipelineReport(r: PipelineReport): string {
  const v = r.verdict;
  const rows: [string, string | number | undefined][] = [
    ['messages sent to the source (RabbitMQ)', r.sent + r.resent],
    ['  of which resent (unconfirmed send)', r.resent],
    ['distinct ids', r.distinct],
    ['planned duplicate sends (30%)', r.plannedDuplicates],
    ['poison ids (1%)', v?.service.poisonExpected],
    ['service deliveries handled (≥)', r.serviceDeliveries],
    ['service duplicates suppressed (≥)', r.serviceDuplicatesSuppressed],
    ['outbox rows (one per good id)', v?.outbox.rows],
    ['sink deliveries handled (≥)', r.sinkDeliveries],
    ['sink duplicates delivered (≥)', r.sinkDuplicatesDelivered],
    ['sink duplicates suppressed (≥)', r.sinkDuplicatesSuppressed],
    ['kills: service / relay / sink (SIGKILL)', `${r.kills.service} / ${r.kills.relay} / ${r.kills.sink}`],
    ['process starts', r.starts],
    ['exits not caused by the harness', r.unexpectedExits.length],
    ['broker restart (destination)', r.brokerRestart],
    ['postgres restart', r.postgresRestart],
    ['quiescent', r.quiescent ? 'yes' : `no (backlog ${r.backlogAtEnd})`],
    ['service: EFFECTS APPLIED TWICE', v?.service.appliedTwice],
    ['service: LOST', v?.service.lost],
    [
      'dead-lettered at the source (poison ids)',
      v ? `${v.service.deadLettered}/${v.service.poisonExpected}` : undefined,
    ],
    ['outbox rows undispatched / parked', v ? `${v.outbox.undispatched} / ${v.outbox.parked}` : undefined],
    ['SINK: EFFECTS APPLIED TWICE', v?.sinkAppliedTwice],
    ['SINK: LOST', v?.sinkLost],
    ['sink: effects of unexpected ids', v?.sinkUnexpected],
    ['sink: effect rows beyond one per good id', v?.sinkSurplusRows],
    ['violations', r.error !== undefined ? 'RUN FAILED' : v?.violations.length],
    ['seconds', Math.round(r.seconds)],
    ['verdict', pipelinePassed(r) ? 'PASS' : 'FAIL'],
  ];
  const header = ['', 'pipeline: rabbitmq → service + outbox → relay → kafka → sink'];
  const body = rows.map(([label, value]) => [label, cell(value)]);
  const widths = header.map((_, c) => Math.max(...[header, ...body].map((row) => row[c]!.length)));
  const line = (row: string[]): string =>
    row.map((x, c) => (c === 0 ? x.padEnd(widths[c]!) : x.padStart(widths[c]!))).join('  ');
  const out = [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)];
  const problems = [...(v?.violations ?? []), ...(r.error !== undefined ? [`run failed: ${r.error}`] : [])];
  if (problems.length > 0) {
    out.push(
      '',
      `pipeline: ${problems.length} problem(s) — schemas ${r.schema} and ${r.schema}_sink kept for inspection`,
    );
    for (const p of problems) out.push(`  - ${p}`);
  }
  if (r.unexpectedExits.length > 0) {
    out.push('', 'pipeline: processes that exited by themselves (restarted by the harness):');
    for (const e of r.unexpectedExits.slice(0, 10)) out.push(`  - ${e}`);
  }
  return out.join('\n');
}
