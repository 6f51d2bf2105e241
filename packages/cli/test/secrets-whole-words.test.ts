// The secret scrubber removes a secret where it stands as a secret, not its letters inside another word: a
// password that happens to be part of a queue's name must not garble that name (real RabbitMQ DLQ).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runCli } from '../src/run-cli.js';
import { secretScrubber } from '../src/settings/secret-scrubber.js';
import { captureIo } from './support/capture-io.js';
import { rabbitmqFixture } from './support/rabbitmq-fixture.js';
import type { ReplayFixture } from './support/replay-fixture.js';
import { requireService } from './support/services.js';

describe('the secret scrubber scrubs whole occurrences (real RabbitMQ)', () => {
  let broker: ReplayFixture;
  beforeAll(async () => {
    broker = await rabbitmqFixture();
  });
  afterAll(async () => {
    await broker?.dispose();
  });

  it("prints a DLQ whose name contains the password's letters inside a word as it is", async () => {
    // The DLQ's random hex part, e.g. `…-9f3c2a71be.dlq`: the secret is its middle, inside that word.
    const word = /-([0-9a-f]{10})\.dlq$/.exec(broker.dlq)![1]!;
    const secret = word.slice(2, 8);
    const run = captureIo({ env: { PGPASSWORD: secret } });
    const code = await runCli(
      [
        'dlq',
        'list',
        '--transport',
        'rabbitmq',
        '--from',
        broker.dlq,
        '--amqp-url',
        requireService('AMQP_URL'),
      ],
      run.io,
    );
    expect(code).toBe(0);
    expect(run.stdout()).toContain(`rabbitmq DLQ ${broker.dlq}: 0 dead letters shown of 0 read`);
  });

  it('still scrubs the secret wherever it stands whole: alone, quoted, in URL userinfo, as a key/value', () => {
    const scrubber = secretScrubber([], { PGPASSWORD: 'c2a71b' });
    expect(scrubber.scrub('auth failed for c2a71b')).toBe('auth failed for ***');
    expect(scrubber.scrub('password "c2a71b" refused')).toBe('password "***" refused');
    expect(scrubber.scrub('at postgres://app:c2a71b@db/x')).toBe('at postgres://app:***@db/x');
    expect(scrubber.scrub('token=c2a71b.')).toBe('token=***.');
    expect(scrubber.scrub('queue q-9fc2a71be0.dlq and c2a71bx')).toBe('queue q-9fc2a71be0.dlq and c2a71bx');
  });
});
