// The promise of `npm test` (and of the examples' `npm run start`) on a machine where no service runs: it starts
// the project's own services, stops only those it started (also when it is killed), and when it cannot start
// them it fails at once with one message that says what to run. Each case runs in a state folder of its own
// (INBOXKIT_SERVICES_DIR), with its own Postgres on a free port, so the run's shared services are never touched.
import { execFile, spawn } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ENV_VAR,
  REPO_ROOT,
  SERVICES_SCRIPT,
  SERVICE_NAMES,
  readServicesEnv,
  tcpAnswers,
} from './discovery.js';

const execFileAsync = promisify(execFile);
const WITH_SERVICES = join(REPO_ROOT, 'scripts/services/with-services.ts');
const VITEST = join(REPO_ROOT, 'node_modules/vitest/vitest.mjs');

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) {
    await execFileAsync('bash', [SERVICES_SCRIPT, 'down', 'postgres', 'redis'], { env: cleanEnv(dir) }).catch(
      () => {},
    );
    rmSync(dir, { recursive: true, force: true });
  }
});

/** An empty state folder the `postgres` user can reach (services.sh runs Postgres as that user under root). */
function stateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'inboxkit-services-'));
  chmodSync(dir, 0o755);
  dirs.push(dir);
  return dir;
}

/** The environment of a process that finds no service: none of the run's settings, its own state folder. */
function cleanEnv(dir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of SERVICE_NAMES) delete env[ENV_VAR[name]];
  for (const key of Object.keys(env)) {
    if (/^(VITEST|INBOXKIT_|RABBITMQ_|SQS_|AWS_)/.test(key) || key === 'TEST' || key === 'NODE_ENV')
      delete env[key];
  }
  return { ...env, INBOXKIT_SERVICES_DIR: dir, INBOXKIT_TESTCONTAINERS: '0', ...extra };
}

function run(
  args: string[],
  env: NodeJS.ProcessEnv,
): { child: ReturnType<typeof spawn>; done: Promise<{ code: number | null; output: string }> } {
  const child = spawn(process.execPath, args, { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const done = new Promise<{ code: number | null; output: string }>((resolvePromise) =>
    child.once('close', (code) => resolvePromise({ code, output })),
  );
  return { child, done };
}

async function postgresAnswers(dir: string): Promise<boolean> {
  const url = readServicesEnv(join(dir, 'env'))['DATABASE_URL'];
  if (!url) return false;
  return tcpAnswers('127.0.0.1', Number(new URL(url).port), 500);
}

/** A TCP port nothing listens on now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolvePromise) => server.listen(0, '127.0.0.1', resolvePromise));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolvePromise) => server.close(resolvePromise));
  return port;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolvePromise) => setTimeout(resolvePromise, 200));
  }
}

// Each case starts processes (a vitest run, services.sh, Postgres): seconds on a quiet machine, a minute or more on
// a busy one.
const SLOW = { timeout: 240_000 };

describe('npm test without running services', SLOW, () => {
  it('fails at once with the command to run when a system package is missing and cannot be installed', async () => {
    const dir = stateDir();
    const env = cleanEnv(dir, { INBOXKIT_NO_INSTALL: '1', INBOXKIT_PG_BIN: join(dir, 'no-postgres') });
    const { code, output } = await run(
      [VITEST, 'run', '--project', 'e2e', 'test/smoke/postgres.test.ts'],
      env,
    ).done;

    expect(code).toBe(1);
    expect(output).toContain(
      'Install them with: sudo apt-get update && sudo apt-get install -y --no-install-recommends postgresql-15',
    );
    expect(output).toContain('Then run `npm test` again.');
    // Nothing ran and nothing was started: no test result, no connection error, no service log.
    expect(output).not.toMatch(/passed|failed|ECONNREFUSED/);
    expect(readdirSync(join(dir, 'logs'))).toEqual([]);
  });

  it('fails at once when a service set in the environment does not answer', async () => {
    const dir = stateDir();
    const dead: Record<string, string> = {
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/inboxkit',
      KAFKA_BROKERS: '127.0.0.1:1',
      AMQP_URL: 'amqp://guest:guest@127.0.0.1:1',
      SQS_ENDPOINT: 'http://127.0.0.1:1',
      REDIS_URL: 'redis://127.0.0.1:1',
    };
    const { code, output } = await run(
      [VITEST, 'run', '--project', 'e2e', 'test/smoke/postgres.test.ts'],
      cleanEnv(dir, dead),
    ).done;

    expect(code).toBe(1);
    expect(output).toContain(
      'postgres: DATABASE_URL=postgres://postgres@127.0.0.1:1/inboxkit does not answer',
    );
    expect(output).toContain('unset DATABASE_URL, KAFKA_BROKERS, AMQP_URL, SQS_ENDPOINT, REDIS_URL');
    expect(output).not.toMatch(/passed|ECONNREFUSED/);
  });
});

describe('with-services (the examples runner)', SLOW, () => {
  it('starts the own Postgres when none runs, hands its settings to the command, and stops it after', async () => {
    const dir = stateDir();
    const script = 'console.log("DATABASE_URL=" + process.env.DATABASE_URL); process.exit(3)';
    const { code, output } = await run(
      ['--import', 'tsx', WITH_SERVICES, 'postgres', '--', process.execPath, '-e', script],
      cleanEnv(dir),
    ).done;

    expect(code).toBe(3); // the command's own exit code
    const url = readServicesEnv(join(dir, 'env'))['DATABASE_URL'];
    expect(output).toContain(`DATABASE_URL=${url}`);
    expect(output).toContain('stopped postgres (started for this run)');
    expect(await postgresAnswers(dir)).toBe(false);
  });

  it('leaves a service that was running before as it was', async () => {
    const dir = stateDir();
    await execFileAsync('bash', [SERVICES_SCRIPT, 'up', 'postgres'], { env: cleanEnv(dir) });
    const { code, output } = await run(
      ['--import', 'tsx', WITH_SERVICES, 'postgres', '--', process.execPath, '-e', 'process.exit(0)'],
      cleanEnv(dir),
    ).done;

    expect(code).toBe(0);
    expect(output).toMatch(/postgres \(services: postgres:\/\//);
    expect(output).not.toContain('stopped');
    expect(await postgresAnswers(dir)).toBe(true);
  });

  it('leaves running a service that came up while it was starting it (another run restarting it)', async () => {
    const dir = stateDir();
    const registry = mkdtempSync(join(tmpdir(), 'inboxkit-ports-'));
    dirs.push(registry);
    const port = await freePort();
    mkdirSync(join(dir, 'run'), { recursive: true });
    mkdirSync(join(dir, 'logs'), { recursive: true });
    writeFileSync(join(dir, 'ports.env'), `INBOXKIT_REDIS_PORT=${port}\n`);
    // Another services.sh holds the folder's lock, as a chaos test's `restart redis` does, and brings Redis up
    // once told to: the run's discovery finds no Redis, and its `up` waits for the lock, then finds it running.
    const go = join(dir, 'go');
    const pidFile = join(dir, 'run/redis.pid');
    // -o: Redis, a daemon, must not inherit the lock (it would hold it for ever).
    const restart = spawn(
      'flock',
      [
        '-o',
        join(dir, 'run/services.lock'),
        'bash',
        '-c',
        `until [ -e ${go} ]; do sleep 0.05; done
         redis-server --port ${port} --bind 127.0.0.1 --daemonize yes --pidfile ${pidFile} --save '' \
           --logfile ${join(dir, 'logs/redis.log')}
         until [ -s ${pidFile} ]; do sleep 0.05; done`,
      ],
      { stdio: 'ignore' },
    );
    const restarted = new Promise((resolvePromise) => restart.once('exit', resolvePromise));
    const env = cleanEnv(dir, { INBOXKIT_PORT_REGISTRY: registry });
    const { child, done } = run(
      ['--import', 'tsx', WITH_SERVICES, 'redis', '--', process.execPath, '-e', 'process.exit(0)'],
      env,
    );
    let output = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('starting redis')) writeFileSync(go, '');
    });
    const { code, output: all } = await done;
    expect(await restarted).toBe(0);

    expect(code).toBe(0);
    expect(all).toContain('redis found running meanwhile: left running at the end');
    expect(all).not.toContain('stopped redis');
    expect(await tcpAnswers('127.0.0.1', port, 500)).toBe(true);
  });

  it('stops what it started when it is killed with SIGKILL', async () => {
    const dir = stateDir();
    const pidFile = join(dir, 'command.pid');
    const { child } = run(
      [
        '--import',
        'tsx',
        WITH_SERVICES,
        'postgres',
        '--',
        'bash',
        '-c',
        `echo $$ > ${pidFile}; exec sleep 120`,
      ],
      cleanEnv(dir),
    );
    await until('the command runs', async () => existsSync(pidFile) && (await postgresAnswers(dir)));
    const exited = new Promise((resolvePromise) => child.once('exit', resolvePromise));
    child.kill('SIGKILL');
    await exited; // not `done`: the orphaned command keeps the output pipes open
    process.kill(Number(readFileSync(pidFile, 'utf8').trim()), 'SIGTERM'); // the orphaned `sleep`

    await until('the watchdog stopped Postgres', async () => !(await postgresAnswers(dir)));
    expect(readFileSync(join(dir, 'logs/stop-after.log'), 'utf8')).toMatch(/is gone: stopping postgres/);
  });
});

// Two checkouts on one machine (two state folders here): each uses only the services it started. Seen before: a
// second clone's `npm test` attached to the first clone's servers, which answered on the ports its own stale
// .services/env named, and, while the first clone restarted its ElasticMQ, started its own on that port.
describe('two checkouts on one machine', SLOW, () => {
  /** A TCP server in a process of its own (another checkout's broker, say); resolves with its port and pid. */
  async function foreignListener(port = 0): Promise<{ port: number; pid: number; stop: () => void }> {
    const code = `const s = require('node:net').createServer((c) => c.destroy());
      s.listen(${port}, '127.0.0.1', () => console.log(s.address().port));`;
    const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    listeners.push(child);
    const bound = await new Promise<number>((resolvePromise, reject) => {
      child.stdout.once('data', (chunk: Buffer) => resolvePromise(Number(chunk.toString().trim())));
      child.once('exit', (exitCode) => reject(new Error(`the listener exited with ${String(exitCode)}`)));
    });
    return { port: bound, pid: child.pid!, stop: () => child.kill() };
  }
  const listeners: ReturnType<typeof spawn>[] = [];
  afterEach(() => {
    for (const child of listeners.splice(0)) child.kill();
  });

  /** What with-services hands a command for redis, discovery's summary line included. */
  async function discoveredRedis(dir: string): Promise<string> {
    const script = 'console.log("REDIS_URL=" + process.env.REDIS_URL)';
    const { output } = await run(
      ['--import', 'tsx', WITH_SERVICES, 'redis', '--', process.execPath, '-e', script],
      cleanEnv(dir, { INBOXKIT_START_SERVICES: '0' }),
    ).done;
    return output;
  }

  it("never uses a server that answers on a port its .services/env names unless this checkout's own process serves it", async () => {
    const dir = stateDir();
    const other = await foreignListener();
    const url = `redis://127.0.0.1:${other.port}`;
    writeFileSync(join(dir, 'env'), `REDIS_URL=${url}\n`);
    mkdirSync(join(dir, 'run'), { recursive: true });

    // No pid file of ours: another checkout's server answers there.
    let output = await discoveredRedis(dir);
    expect(output).toContain('redis MISSING');
    expect(output).toContain('another process answers there and is not used');
    expect(output).toContain('REDIS_URL=undefined');

    // A pid file of ours whose process is alive but does not listen there (a reused pid): still not ours.
    writeFileSync(join(dir, 'run/redis.pid'), `${process.pid}\n`);
    output = await discoveredRedis(dir);
    expect(output).toContain('redis MISSING');
    expect(output).toContain('REDIS_URL=undefined');

    // Our pid file names the process that listens there: used (the check can pass).
    writeFileSync(join(dir, 'run/redis.pid'), `${other.pid}\n`);
    output = await discoveredRedis(dir);
    expect(output).toContain(`redis (services: ${url})`);
    expect(output).toContain(`REDIS_URL=${url}`);
  });

  it("never starts on a port another checkout claims, even while that checkout's service is stopped for a restart", async () => {
    const registry = mkdtempSync(join(tmpdir(), 'inboxkit-ports-'));
    dirs.push(registry);
    const [a, b] = [stateDir(), stateDir()];
    const env = (dir: string) => cleanEnv(dir, { INBOXKIT_PORT_REGISTRY: registry });
    const services = (dir: string, ...args: string[]) =>
      execFileAsync('bash', [SERVICES_SCRIPT, ...args], { env: env(dir) });
    const portOf = (dir: string) => Number(new URL(readServicesEnv(join(dir, 'env'))['REDIS_URL']!).port);

    await services(a, 'up', 'redis');
    const portA = portOf(a);
    // A stops its Redis (the first half of `restart`) and B starts its own meanwhile: B must not take A's port,
    // although nothing listens on it now.
    await services(a, 'down', 'redis');
    await services(b, 'up', 'redis');
    const portB = portOf(b);
    expect(portB).not.toBe(portA);
    // A starts again on its own port, its address unchanged for the tests and tools that hold it.
    await services(a, 'up', 'redis');
    expect(portOf(a)).toBe(portA);
    expect(await tcpAnswers('127.0.0.1', portA, 500)).toBe(true);

    // A process that honours no claim takes A's port while A's Redis is down: A's restart fails, naming it, and
    // does not move A elsewhere behind the back of whoever holds A's address.
    await services(a, 'down', 'redis');
    const squatter = await foreignListener(portA);
    const restart = await services(a, 'restart', 'redis').then(
      () => 'restarted',
      (error: { stderr?: string }) => error.stderr ?? '',
    );
    expect(restart).toContain(`cannot start again on its port (INBOXKIT_REDIS_PORT=${portA}`);
    expect(readFileSync(join(a, 'ports.env'), 'utf8')).toContain(`INBOXKIT_REDIS_PORT=${portA}\n`);
    squatter.stop();
  });
});
