// Every connection-string form libpq and node-postgres accept, masked where it is printed, its secrets found
// for scrubbing free text, and key/value strings translated for node-postgres.

import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { parseKeyValueConnectionString } from '../../src/settings/key-value-connection-string.js';
import { connectionStringSecrets, maskConnectionString } from '../../src/settings/mask-connection-string.js';
import { pgConnectionConfig } from '../../src/settings/pg-connection-config.js';
import { SecretScrubber, secretScrubber } from '../../src/settings/secret-scrubber.js';

/** libpq's quoting of a key/value value. */
const quote = (value: string): string => `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

describe('maskConnectionString', () => {
  it.each([
    ['postgres://app:s3cret@db:5432/app', 'postgres://app:***@db:5432/app'],
    ['postgresql://app:p%40ss%2Fw@db/app', 'postgresql://app:***@db/app'],
    ['postgres://app:s3cret@db1:5432,db2:5433/app', 'postgres://app:***@db1:5432,db2:5433/app'],
    ['postgres://app:pa/ss@db/app', 'postgres://app:***@db/app'],
    ['postgres://app:pa@ss@db/app', 'postgres://app:***@db/app'],
    ['postgres://app:pa?ss@db/app', 'postgres://app:***@db/app'],
    [
      'postgres://app@db/app?sslmode=require&password=s3cret',
      'postgres://app@db/app?sslmode=require&password=***',
    ],
    ['postgres://db/app?sslpassword=s3cret&sslkey=/k.pem', 'postgres://db/app?sslpassword=***&sslkey=***'],
    ['postgres://db/app?PassWord=s3cret', 'postgres://db/app?PassWord=***'],
    ['postgres://db/app?pass%77ord=s3cret', 'postgres://db/app?pass%77ord=***'],
    ['socket:/var/run/postgresql?db=app&password=s3cret', 'socket:/var/run/postgresql?db=app&password=***'],
    ['amqp://guest:guest@localhost:5672/vhost', 'amqp://guest:***@localhost:5672/vhost'],
    ['host=db user=app password=s3cret dbname=app', 'host=db user=app password=*** dbname=app'],
    ["host=db password='a b\\'c' dbname=app", 'host=db password=*** dbname=app'],
    ['host=db password = s3cret dbname=app', 'host=db password = *** dbname=app'],
    ['host=db password=s\\ 3cret dbname=app', 'host=db password=*** dbname=app'],
    ["host=db password='unterminated dbname=app", 'host=db password=***'],
    ['host=db sslpassword=s3cret sslkey=/k.pem', 'host=db sslpassword=*** sslkey=***'],
    ['http://localhost:9324', 'http://localhost:9324'],
    ['postgres://app@db/app?application_name=me@host', 'postgres://app@db/app?application_name=me@host'],
    ['/var/run/postgresql app', '/var/run/postgresql app'],
    ['orders-dlq', 'orders-dlq'],
  ])('%s → %s', (input, masked) => {
    expect(maskConnectionString(input)).toBe(masked);
  });

  it('never shows any password, however it is written (URL-encoded, libpq-quoted, raw in a URL)', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 30, unit: 'binary' }), (raw) => {
        const password = `Zx${raw}`;
        for (const text of [
          `postgres://app:${encodeURIComponent(password)}@db:5432/app`,
          `postgres://app@db:5432/app?password=${encodeURIComponent(password)}`,
          `host=db user=app password=${quote(password)} dbname=app`,
          `host=db sslpassword = ${quote(password)}`,
        ]) {
          const masked = maskConnectionString(text);
          expect(masked).not.toContain(password);
          expect(masked).not.toContain(encodeURIComponent(password));
          expect(masked).not.toContain(quote(password));
          expect(masked).toMatch(/db/);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('parseKeyValueConnectionString', () => {
  it('reads quoted values with escapes, spaces around =, and escapes in bare values as libpq does', () => {
    const { entries, error } = parseKeyValueConnectionString(
      "host = db  password='a b\\'c\\\\' dbname=x\\ y options='-c x=1'",
    );
    expect(error).toBeUndefined();
    expect(entries.map((e) => [e.key, e.value])).toEqual([
      ['host', 'db'],
      ['password', "a b'c\\"],
      ['dbname', 'x y'],
      ['options', '-c x=1'],
    ]);
  });

  it('round-trips any value quoted the libpq way', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40, unit: 'binary' }), (value) => {
        const { entries, error } = parseKeyValueConnectionString(`host=db password=${quote(value)} dbname=x`);
        expect(error).toBeUndefined();
        expect(entries.find((e) => e.key === 'password')?.value).toBe(value);
        expect(entries.find((e) => e.key === 'dbname')?.value).toBe('x');
      }),
      { numRuns: 300 },
    );
  });

  it('reports what libpq would refuse, keeping what it read', () => {
    expect(parseKeyValueConnectionString("host=db password='open").error).toMatch(/unterminated/);
    expect(parseKeyValueConnectionString('host=db nonsense').error).toMatch(/missing "="/);
  });
});

describe('connectionStringSecrets', () => {
  it('finds each secret as written and as decoded', () => {
    expect(connectionStringSecrets('postgres://app:p%40ss@db/app')).toEqual(['p%40ss', 'p@ss']);
    expect(connectionStringSecrets('postgres://db/app?password=a%20b&sslpassword=c')).toEqual([
      'a%20b',
      'a b',
      'c',
    ]);
    expect(connectionStringSecrets("host=db password='a b\\'c'")).toEqual(["a b'c", "'a b\\'c'"]);
    expect(connectionStringSecrets('postgres://app@db/app')).toEqual([]);
    expect(connectionStringSecrets('orders-dlq')).toEqual([]);
  });
});

describe('SecretScrubber', () => {
  it('removes known secrets wherever a message quotes them, also JSON-escaped', () => {
    const scrubber = new SecretScrubber().addConnectionString("host=db password='qu\"ote s3cret'");
    expect(scrubber.scrub('failed with qu"ote s3cret')).toBe('failed with ***');
    expect(scrubber.scrub(JSON.stringify({ detail: 'was qu"ote s3cret' }))).not.toContain('s3cret');
  });

  it('masks credential-shaped text it was not told about', () => {
    const scrubber = new SecretScrubber();
    expect(scrubber.scrub('connect to postgres://u:hunter22@db/app failed')).toBe(
      'connect to postgres://u:***@db/app failed',
    );
    expect(scrubber.scrub('bad value in host=db password=hunter22 dbname=x')).toBe(
      'bad value in host=db password=*** dbname=x',
    );
    expect(scrubber.scrub("bad: password='hun ter22' dbname=x")).toBe('bad: password=*** dbname=x');
    expect(scrubber.scrub('GET /q?a=1&token=hunter22&b=2')).toBe('GET /q?a=1&token=***&b=2');
    expect(scrubber.scrub('password authentication failed for user "app"')).toBe(
      'password authentication failed for user "app"',
    );
  });

  it('keeps the punctuation after a value masked already, and masks short passwords only where they stand as one', () => {
    const scrubber = new SecretScrubber().add('pw');
    expect(scrubber.scrub('at host=db password=***: refused')).toBe('at host=db password=***: refused');
    expect(scrubber.scrub('at host=db password=pw: refused')).toBe('at host=db password=*** refused');
    expect(scrubber.scrub('pwd is not scrubbed as text')).toBe('pwd is not scrubbed as text');
  });

  it('learns the secrets of every argument and of the environment', () => {
    const scrubber = secretScrubber(
      ['status', '--database-url=postgres://u:from-flag@db/app', 'host=db password=from-positional'],
      {
        DATABASE_URL: 'postgres://u:from-env@db/app',
        AMQP_URL: 'amqp://g:from-amqp@r',
        PGPASSWORD: 'from-pgpassword',
        AWS_SECRET_ACCESS_KEY: 'from-aws',
        AWS_SESSION_TOKEN: 'from-token',
        HOME: '/home/app',
      },
    );
    const text = 'from-flag from-positional from-env from-amqp from-pgpassword from-aws from-token /home/app';
    expect(scrubber.scrub(text)).toBe('*** *** *** *** *** *** *** /home/app');
  });
});

describe('pgConnectionConfig', () => {
  it('passes URLs on and translates key/value strings parameter by parameter', () => {
    expect(pgConnectionConfig(' postgres://u:p@db/app ')).toEqual({
      connectionString: 'postgres://u:p@db/app',
    });
    expect(
      pgConnectionConfig(
        "host=db port=5433 user=app password='a b' dbname=shop application_name=x options='-c lock_timeout=1s' connect_timeout=7 sslmode=disable",
      ),
    ).toEqual({
      host: 'db',
      port: 5433,
      user: 'app',
      password: 'a b',
      database: 'shop',
      application_name: 'x',
      options: '-c lock_timeout=1s',
      connectionTimeoutMillis: 7_000,
      ssl: false,
    });
    expect(pgConnectionConfig('hostaddr=10.0.0.1 dbname=x')).toMatchObject({
      host: '10.0.0.1',
      database: 'x',
    });
    expect(pgConnectionConfig('/var/run/postgresql app')).toEqual({
      connectionString: '/var/run/postgresql app',
    });
  });

  it('maps sslmode and the certificate files as libpq means them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'inboxkit-ssl-'));
    await writeFile(join(dir, 'root.crt'), 'ROOT');
    await writeFile(join(dir, 'client.key'), 'KEY');
    expect(pgConnectionConfig('host=db sslmode=require').ssl).toEqual({ rejectUnauthorized: false });
    const verifyCa = pgConnectionConfig(`host=db sslmode=verify-ca sslrootcert=${join(dir, 'root.crt')}`).ssl;
    expect(verifyCa).toMatchObject({ ca: 'ROOT' });
    expect((verifyCa as { checkServerIdentity: () => unknown }).checkServerIdentity()).toBeUndefined();
    expect(
      pgConnectionConfig(`host=db sslmode=verify-full sslkey=${join(dir, 'client.key')} sslpassword=pp`).ssl,
    ).toEqual({ key: 'KEY', passphrase: 'pp' });
    expect(pgConnectionConfig('host=db sslpassword=pp').ssl).toBeUndefined();
    expect(() => pgConnectionConfig('host=db sslmode=verify-ca')).toThrow(/needs sslrootcert/);
    expect(() => pgConnectionConfig('host=db sslmode=sometimes')).toThrow(/unknown sslmode/);
  });

  it('refuses what node-postgres cannot serve, with a ConfigurationError that shows no password', () => {
    for (const [connection, why] of [
      ['postgres://u:s3cret-a@db1,db2/app', /several hosts \(db1,db2\)/],
      ['host=db1,db2 password=s3cret-a', /several hosts/],
      ['host=db port=5432,5433 password=s3cret-a', /several ports/],
      ["host=db password='s3cret-a", /unterminated/],
      ['host=db password=s3cret-a target_session_attrs=any', /"target_session_attrs" is not supported/],
      ['host=db port=x password=s3cret-a', /port must be a TCP port/],
      ['host=db connect_timeout=soon password=s3cret-a', /connect_timeout must be a whole number/],
    ] as const) {
      let thrown: unknown;
      try {
        pgConnectionConfig(connection);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toMatchObject({ code: 'CONFIGURATION', message: expect.stringMatching(why) });
      expect((thrown as Error).message).not.toContain('s3cret');
    }
  });
});
