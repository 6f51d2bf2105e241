// No password reaches the CLI's output: every connection-string form libpq and node-postgres accept, given to
// every command that prints a URL or an error, against the real Postgres (reachable: the command succeeds
// and prints where it connected; unreachable: it fails and says why) and through an error that quotes the
// connection string. Each secret is unique, so any leak of any part of it is caught.

import type { CliServices } from '../src/cli-services.js';
import { openDatabase } from '../src/inbox/open-database.js';
import { runCli } from '../src/run-cli.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { captureIo } from './support/capture-io.js';
import { inboxDatabase } from './support/inbox-database.js';
import type { InboxDatabase } from './support/inbox-database.js';
import { deadLetter, MemoryDeadLetterQueue, MemoryPublisher } from './support/memory-ports.js';
import { requireService } from './support/services.js';

/** One way of writing a connection: the `--database-url` value, the environment, and what must never show. */
interface Form {
  readonly name: string;
  /** The connection string for host:port (reachable or not). */
  readonly url: (host: string, port: string) => string;
  readonly env?: Record<string, string>;
  /** Fragments of the secret, as written and as decoded: none may appear in the output. */
  readonly secrets: readonly string[];
  /** False for forms that cannot connect (the command fails with a clear message instead). */
  readonly connects: boolean;
}

let database: InboxDatabase;
let user: string;
let dbname: string;

const FORMS: readonly Form[] = [
  {
    name: 'URL, password in userinfo',
    url: (h, p) => `postgres://${user}:Pw-userinfo-1x@${h}:${p}/${dbname}`,
    secrets: ['Pw-userinfo-1x'],
    connects: true,
  },
  {
    name: 'URL, percent-encoded password in userinfo',
    url: (h, p) => `postgresql://${user}:Pw%40enc%2F2x%20z@${h}:${p}/${dbname}`,
    secrets: ['Pw%40enc', 'Pw@enc', 'enc/2x', 'enc%2F2x'],
    connects: true,
  },
  {
    name: 'URL, ?password= query parameter',
    url: (h, p) => `postgres://${user}@${h}:${p}/${dbname}?application_name=x&password=Pw-query-3x`,
    secrets: ['Pw-query-3x'],
    connects: true,
  },
  {
    name: 'URL, ?sslpassword= and ?sslkey= query parameters',
    url: (h, p) => `postgres://${user}@${h}:${p}/${dbname}?sslpassword=Pw-sslpass-4x`,
    secrets: ['Pw-sslpass-4x'],
    connects: true,
  },
  {
    name: 'key/value',
    url: (h, p) => `host=${h} port=${p} user=${user} password=Pw-kv-5x dbname=${dbname}`,
    secrets: ['Pw-kv-5x'],
    connects: true,
  },
  {
    name: 'key/value, quoted value with escapes',
    url: (h, p) => `host=${h} port=${p} user=${user} password='Zq6 kv\\'6\\\\x' dbname=${dbname}`,
    secrets: ['Zq6', "kv'6", "kv\\'6"],
    connects: true,
  },
  {
    name: 'key/value, spaces around = and sslpassword',
    url: (h, p) => `host = ${h} port = ${p} user = ${user} sslpassword = Pw-kvssl-7x dbname = ${dbname}`,
    secrets: ['Pw-kvssl-7x'],
    connects: true,
  },
  {
    name: 'PGPASSWORD in the environment',
    url: (h, p) => `postgres://${user}@${h}:${p}/${dbname}`,
    env: { PGPASSWORD: 'Pw-env-8x' },
    secrets: ['Pw-env-8x'],
    connects: true,
  },
  {
    name: 'multi-host URL',
    url: (h, p) => `postgres://${user}:Pw-multi-9x@${h}:${p},${h}:${p}/${dbname}`,
    secrets: ['Pw-multi-9x'],
    connects: false,
  },
  {
    name: 'key/value, unterminated quote',
    url: (h, p) => `host=${h} port=${p} password='Pw-open-10x dbname=${dbname}`,
    secrets: ['Pw-open-10x'],
    connects: false,
  },
  {
    name: 'URL, raw @ and / in the password',
    url: (h, p) => `postgres://${user}:Pw@raw/11x@${h}:${p}/${dbname}`,
    secrets: ['Pw@raw', 'raw/11x'],
    connects: false,
  },
];

/** What each command needs besides the connection, and the exit code when the database answers. */
const COMMANDS: readonly { name: string; argv: () => string[]; ok: number }[] = [
  { name: 'migrate', argv: () => ['migrate', '--schema', database.schema], ok: 0 },
  { name: 'status', argv: () => ['status', '--schema', database.schema], ok: 0 },
  { name: 'status --json', argv: () => ['status', '--schema', database.schema, '--json'], ok: 0 },
  { name: 'prune', argv: () => ['prune', '--schema', database.schema, '--dry-run'], ok: 0 },
  { name: 'doctor', argv: () => ['doctor', '--schema', database.schema], ok: 0 },
  { name: 'doctor --json', argv: () => ['doctor', '--schema', database.schema, '--json'], ok: 0 },
  {
    name: 'dlq list',
    argv: () => ['dlq', 'list', '--transport', 'kafka', '--from', 'orders-dlq', '--schema', database.schema],
    ok: 0,
  },
  {
    name: 'dlq replay --dry-run',
    argv: () => [
      'dlq',
      'replay',
      '--transport',
      'kafka',
      '--from',
      'orders-dlq',
      '--schema',
      database.schema,
      '--dry-run',
      '--json',
    ],
    ok: 0,
  },
];

/** The real database, and an in-memory DLQ for the `dlq` commands (their connection is what is tested). */
function services(openDb: CliServices['openDatabase'] = openDatabase): CliServices {
  return {
    openDatabase: openDb,
    openTransport: async () => ({
      reader: new MemoryDeadLetterQueue([deadLetter('a')]),
      publisher: new MemoryPublisher(),
      resolveDestination: async (to) => to,
      close: async () => undefined,
    }),
  };
}

async function run(
  argv: string[],
  env: Record<string, string> = {},
  openDb?: CliServices['openDatabase'],
): Promise<{ code: number; output: string }> {
  const io = captureIo({ env });
  const code = await runCli(argv, io.io, { services: services(openDb) });
  return { code, output: `${io.stdout()}\n${io.stderr()}` };
}

function expectNoSecret(output: string, form: Form): void {
  for (const secret of form.secrets)
    expect(output, `output shows ${JSON.stringify(secret)}`).not.toContain(secret);
}

beforeAll(async () => {
  database = await inboxDatabase();
  const url = new URL(requireService('DATABASE_URL'));
  user = decodeURIComponent(url.username) || 'postgres';
  dbname = decodeURIComponent(url.pathname.slice(1));
});
afterAll(async () => {
  await database?.dispose();
});

function reachable(): [string, string] {
  const url = new URL(requireService('DATABASE_URL'));
  return [url.hostname, url.port || '5432'];
}

describe.each(FORMS)('a connection given as $name', (form) => {
  it.each(COMMANDS)('$name against the real database prints no secret', async (command) => {
    const { code, output } = await run(
      [...command.argv(), '--database-url', form.url(...reachable())],
      form.env,
    );
    expectNoSecret(output, form);
    if (form.connects) expect({ code, output }).toMatchObject({ code: command.ok });
    else expect(code, output).not.toBe(0);
  });

  it.each(COMMANDS)('$name against an unreachable database prints no secret', async (command) => {
    const { code, output } = await run(
      [...command.argv(), '--database-url', form.url('127.0.0.1', '1')],
      form.env,
    );
    expectNoSecret(output, form);
    expect(code, output).not.toBe(0);
    expect(output).toMatch(/postgres|connect|database/i);
  });

  it('an error that quotes the connection string (as a driver may) is printed without the secret', async () => {
    const quoting: CliServices['openDatabase'] = async (settings) => {
      const quoted = `${settings.databaseUrl ?? ''} ${form.env?.PGPASSWORD ?? ''}`;
      throw new Error(`could not connect with ${quoted}`, {
        cause: new Error(`connection string was ${JSON.stringify(quoted)}`),
      });
    };
    for (const argv of [
      ['status'],
      ['doctor', '--json'],
      ['dlq', 'list', '--transport', 'kafka', '--from', 'orders-dlq'],
    ]) {
      const { code, output } = await run(
        [...argv, '--database-url', form.url('127.0.0.1', '1')],
        form.env,
        quoting,
      );
      expectNoSecret(output, form);
      expect(code, output).not.toBe(0);
      expect(output).toMatch(/could not connect with/);
    }
  });

  it('a connection string typed without its flag is not echoed by the usage error', async () => {
    const { code, output } = await run(['status', form.url('127.0.0.1', '1')], form.env);
    expect(code).toBe(2);
    expectNoSecret(output, form);
  });

  it('the connection string from DATABASE_URL is treated like the flag', async () => {
    const { code, output } = await run(['status', '--schema', database.schema], {
      ...form.env,
      DATABASE_URL: form.url('127.0.0.1', '1'),
    });
    expect(code).toBe(3);
    expectNoSecret(output, form);
  });
});

describe('other connection secrets', () => {
  it('doctor masks the RabbitMQ password of --amqp-url when the broker cannot be reached', async () => {
    for (const amqp of [
      'amqp://guest:Pw-amqp-12x@127.0.0.1:1',
      'amqps://guest:Pw-amqp-12x@127.0.0.1:1/vhost?heartbeat=5',
    ]) {
      const { output } = await run(['doctor', '--amqp-url', amqp, '--json']);
      expect(output).toMatch(/rabbitmq/);
      expect(output).not.toContain('Pw-amqp-12x');
    }
  });

  it('dlq list masks credentials in a --from URL', async () => {
    const { code, output } = await run([
      'dlq',
      'list',
      '--transport',
      'sqs',
      '--from',
      'http://key:Pw-from-13x@127.0.0.1:1/000000000000/orders-dlq',
    ]);
    expect(code).toBe(0);
    expect(output).toMatch(/orders-dlq/);
    expect(output).not.toContain('Pw-from-13x');
  });

  it('AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN quoted in an error are masked', async () => {
    const env = { AWS_SECRET_ACCESS_KEY: 'Pw-aws-14x', AWS_SESSION_TOKEN: 'Pw-token-15x' };
    const { output } = await run(['status', '--database-url', 'postgres://h/db'], env, async () => {
      throw new Error('signed with Pw-aws-14x and Pw-token-15x');
    });
    expect(output).toMatch(/signed with/);
    expect(output).not.toMatch(/Pw-aws-14x|Pw-token-15x/);
  });
});
