// The Idempotency-Key middleware's overhead against the same endpoint without it, in the same run: a node:http
// server (its own process) on 127.0.0.1 whose endpoint inserts one row into Postgres in a transaction, driven
// at a fixed concurrency over keep-alive HTTP by this process. Three variants, interleaved per round:
//
//   plain          POST /plain, no middleware: read the JSON body, one transaction with one INSERT, 201
//   first request  POST /idem with a new Idempotency-Key each time: claim, the same transaction + the stored
//                  response (context.transaction), 201
//   replay         POST /idem again with the keys (and bodies) of the round's first requests: the stored 201
//
// Prints a Markdown table (`| variant | msg/s | p50 ms | p99 ms |`, requests counted as msg/s) and the ratios
// `ratio first request/plain` and `ratio replay/plain` (each the median of the rounds' ratios: a round pairs
// the variants measured right after one another), then a BENCH_RESULT line.
//
//   node --conditions=@inboxkit/source --import tsx packages/http/bench/http-bench.ts [--quick]
//     [--requests N] [--rounds R] [--concurrency C] [--warmup W]

import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { Agent, createServer, request as httpRequest } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Generated } from 'kysely';
import pg from 'pg';

import { percentile, printResult, setting } from '../../../bench/settings.js';
import { idempotencyKeys, migrateIdempotencyKeys } from '@inboxkit/http';
import { idempotentNodeHandler } from '@inboxkit/http/node';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    requests: { type: 'string' },
    rounds: { type: 'string' },
    concurrency: { type: 'string', default: '16' },
    warmup: { type: 'string' },
    // Internal: run as the server process.
    serve: { type: 'boolean', default: false },
    schema: { type: 'string' },
  },
});

interface BenchDB {
  effects: { seq: Generated<string>; ref: string; amount_cents: number };
}

function openDb(schema: string, max: number): Kysely<BenchDB> {
  const pool = new pg.Pool({
    connectionString: setting('DATABASE_URL'),
    max,
    options: `-c search_path=${schema}`,
  });
  pool.on('error', () => undefined); // an idle connection lost must not end the bench
  return new Kysely<BenchDB>({ dialect: new PostgresDialect({ pool }) });
}

// ── the server process ──────────────────────────────────────────────────────────────────────────────────────

async function serve(schema: string, poolSize: number): Promise<void> {
  const db = openDb(schema, poolSize);
  const keys = idempotencyKeys<BenchDB, IncomingMessage>({ db, schema, principal: () => 'bench' });
  const insert = (executor: Kysely<BenchDB>, body: { ref: string; amountCents: number }) =>
    executor
      .insertInto('effects')
      .values({ ref: body.ref, amount_cents: body.amountCents })
      .returning('seq')
      .executeTakeFirstOrThrow();

  const idempotent = idempotentNodeHandler(keys, async (_request, body, context) =>
    context.transaction(async (tx) => {
      const row = await insert(tx, body as { ref: string; amountCents: number });
      return { status: 201, body: { id: row.seq } };
    }),
  );

  async function plain(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request as AsyncIterable<Buffer>) chunks.push(chunk);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { ref: string; amountCents: number };
    const row = await db.transaction().execute((tx) => insert(tx, body));
    const out = Buffer.from(JSON.stringify({ id: row.seq }));
    response.writeHead(201, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': String(out.length),
    });
    response.end(out);
  }

  const server = createServer((request, response) => {
    if (request.url === '/idem') return idempotent(request, response);
    plain(request, response).catch((error: unknown) => {
      response.writeHead(500);
      response.end(String(error));
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.stdout.write(`READY ${(server.address() as AddressInfo).port}\n`);
  process.once('SIGTERM', () => {
    server.closeAllConnections();
    server.close();
    void db.destroy().then(() => process.exit(0));
  });
}

if (args.serve) {
  await serve(args.schema!, Number(args.concurrency) + 4);
} else {
  await drive();
}

// ── the load generator ──────────────────────────────────────────────────────────────────────────────────────

interface Sample {
  readonly perSecond: number;
  readonly p50: number;
  readonly p99: number;
}

async function drive(): Promise<void> {
  const quick = args.quick === true;
  const requests = Number(args.requests ?? (quick ? 600 : 1_000));
  const rounds = Number(args.rounds ?? (quick ? 3 : 6));
  const concurrency = Number(args.concurrency);
  const warmup = Number(args.warmup ?? (quick ? 200 : 500));
  const started = performance.now();

  const schema = `bench_http_${randomBytes(4).toString('hex')}`;
  const db = openDb('public', 2);
  await sql.raw(`CREATE SCHEMA ${schema}`).execute(db);
  await migrateIdempotencyKeys(db, { schema });
  await sql
    .raw(
      `CREATE TABLE ${schema}.effects (seq bigserial PRIMARY KEY, ref text NOT NULL, amount_cents integer NOT NULL)`,
    )
    .execute(db);

  const server = spawn(
    process.execPath,
    [
      '--conditions=@inboxkit/source',
      '--import',
      'tsx',
      fileURLToPath(import.meta.url),
      '--serve',
      '--schema',
      schema,
      '--concurrency',
      String(concurrency),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    server.once('exit', (code) =>
      reject(new Error(`the server process exited (${code}) before it was ready`)),
    );
    createInterface({ input: server.stdout }).on('line', (line) => {
      const m = /^READY (\d+)$/.exec(line);
      if (m !== null) resolve(Number(m[1]));
    });
  });
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });

  function post(
    path: string,
    body: string,
    key: string | undefined,
  ): Promise<{ status: number; replayed: boolean }> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          path,
          method: 'POST',
          agent,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            ...(key !== undefined ? { 'idempotency-key': key } : {}),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, replayed: res.headers['idempotent-replayed'] === 'true' }),
          );
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  type Variant = 'plain' | 'first request' | 'replay';
  const bodyOf = (ref: string) => JSON.stringify({ ref, amountCents: 1_234 });

  /** `count` requests by `concurrency` closed-loop workers; every answer checked. */
  async function load(
    variant: Variant,
    count: number,
    items: readonly { key: string; ref: string }[],
  ): Promise<Sample> {
    const latencies: number[] = [];
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (let i = next++; i < count; i = next++) {
          const item = items[i]!;
          const s = performance.now();
          const r =
            variant === 'plain'
              ? await post('/plain', bodyOf(item.ref), undefined)
              : await post('/idem', bodyOf(item.ref), item.key);
          latencies.push(performance.now() - s);
          if (r.status !== 201 || r.replayed !== (variant === 'replay')) {
            throw new Error(`${variant}: unexpected answer ${r.status} (replayed ${r.replayed})`);
          }
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    latencies.sort((a, b) => a - b);
    return { perSecond: count / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
  }

  const batch = (n: number) => Array.from({ length: n }, () => ({ key: randomUUID(), ref: randomUUID() }));
  try {
    // Warm-up: connections, JIT, the table's first pages; not measured.
    const warm = batch(warmup);
    await load('plain', warmup, warm);
    await load('first request', warmup, warm);
    await load('replay', warmup, warm);

    const samples: Record<Variant, Sample[]> = { plain: [], 'first request': [], replay: [] };
    for (let round = 0; round < rounds; round++) {
      const items = batch(requests);
      // Alternate which runs first, so a drift of the machine does not favour one side.
      if (round % 2 === 0) {
        samples.plain.push(await load('plain', requests, items));
        samples['first request'].push(await load('first request', requests, items));
      } else {
        samples['first request'].push(await load('first request', requests, items));
        samples.plain.push(await load('plain', requests, items));
      }
      samples.replay.push(await load('replay', requests, items));
    }

    const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const summary = Object.fromEntries(
      (Object.keys(samples) as Variant[]).map((v) => [
        v,
        {
          perSecond: median(samples[v].map((s) => s.perSecond)),
          p50: median(samples[v].map((s) => s.p50)),
          p99: median(samples[v].map((s) => s.p99)),
        },
      ]),
    ) as Record<Variant, Sample>;
    // Each round's ratio pairs the variant with the plain endpoint measured right next to it; the headline is
    // the median of those (the machine is shared: rates drift between rounds more than within one).
    const roundRatios = (v: Variant) => samples[v].map((s, i) => s.perSecond / samples.plain[i]!.perSecond);
    const ratio = (v: Variant) => median(roundRatios(v));

    console.log(
      `HTTP Idempotency-Key overhead: node:http on 127.0.0.1 (server in its own process), keep-alive, concurrency ${concurrency}, ` +
        `one Postgres INSERT per request in a transaction; ${rounds} round(s) of ${requests} requests per variant ` +
        `after ${warmup} warm-up requests; rates: medians of the rounds; ratios: medians of the rounds' ratios; requests are counted as msg/s.`,
    );
    console.log('');
    console.log('| variant | msg/s | p50 ms | p99 ms |');
    console.log('| --- | ---: | ---: | ---: |');
    for (const v of Object.keys(summary) as Variant[]) {
      const s = summary[v];
      console.log(`| ${v} | ${Math.round(s.perSecond)} | ${s.p50.toFixed(2)} | ${s.p99.toFixed(2)} |`);
    }
    console.log('');
    if (rounds > 1) {
      for (const v of ['first request', 'replay'] as const) {
        const per = roundRatios(v).map((r) => r.toFixed(2));
        console.log(`  each round, ${v} against plain: ${per.join(' ')}`);
      }
    }
    console.log(`ratio first request/plain: ${ratio('first request').toFixed(2)}×`);
    console.log(`ratio replay/plain: ${ratio('replay').toFixed(2)}×`);
    console.log(
      'No target: the issue sets none. A first request adds the claim (one INSERT … ON CONFLICT, its own commit) ' +
        'and the stored response (an UPDATE in the same transaction) to a one-INSERT endpoint; a replay is the ' +
        'claim attempt plus one SELECT, and no transaction.',
    );
    console.log(`elapsed ${((performance.now() - started) / 1000).toFixed(1)} s`);
    printResult({
      concurrency,
      requests,
      rounds,
      variants: summary,
      ratios: { firstRequest: ratio('first request'), replay: ratio('replay') },
    });
  } finally {
    agent.destroy();
    if (server.exitCode === null) {
      const exited = new Promise((resolve) => server.once('exit', resolve));
      server.kill('SIGTERM');
      await exited;
    }
    await sql.raw(`DROP SCHEMA ${schema} CASCADE`).execute(db);
    await db.destroy();
  }
}
