// The RabbitMQ tests' broker lock (packages/rabbitmq/test/broker-lock.ts), spoken from outside vitest: test
// files hold a shared lock while they use the broker, and whoever restarts it takes the exclusive lock, which
// waits until no other live process holds a shared one. Repeated here because that module registers vitest
// hooks when imported. The torture harness holds the shared lock during a RabbitMQ run and the exclusive one for
// its broker restart; the bench holds the shared one while the RabbitMQ bench runs.

import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const DIR = join(tmpdir(), 'inboxkit-rabbitmq-test-locks');
const EXCLUSIVE = join(DIR, 'exclusive');

function ownerAlive(file: string): boolean {
  try {
    process.kill(Number(readFileSync(file, 'utf8')), 0);
    return true;
  } catch {
    return false;
  }
}

const exclusiveHeld = (): boolean => ownerAlive(join(EXCLUSIVE, 'owner'));
const pause = (): Promise<void> => new Promise((r) => setTimeout(r, 100));

/** Takes the lock (waiting up to `timeoutMs`); resolves with its release. */
export async function exclusiveOrSharedLockHolder(
  kind: 'shared' | 'exclusive',
  timeoutMs = 300_000,
): Promise<() => void> {
  mkdirSync(DIR, { recursive: true });
  const deadline = Date.now() + timeoutMs;
  const late = (what: string): Error => new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
  if (kind === 'shared') {
    const mine = join(DIR, `shared-${process.pid}-${randomBytes(4).toString('hex')}`);
    for (;;) {
      if (!exclusiveHeld()) {
        writeFileSync(mine, String(process.pid));
        if (!exclusiveHeld()) return () => rmSync(mine, { force: true });
        rmSync(mine, { force: true });
      }
      if (Date.now() > deadline) throw late('the RabbitMQ broker lock (someone is restarting the broker)');
      await pause();
    }
  }
  for (;;) {
    try {
      mkdirSync(EXCLUSIVE);
      writeFileSync(join(EXCLUSIVE, 'owner'), String(process.pid));
      break;
    } catch {
      if (!exclusiveHeld()) rmSync(EXCLUSIVE, { recursive: true, force: true });
      else if (Date.now() > deadline) throw late('the exclusive RabbitMQ broker lock');
      else await pause();
    }
  }
  const release = (): void => rmSync(EXCLUSIVE, { recursive: true, force: true });
  // Other processes' shared locks (this process's own shared lock does not block its restart).
  const others = (): string[] =>
    readdirSync(DIR).filter(
      (f) => f.startsWith('shared-') && !f.startsWith(`shared-${process.pid}-`) && ownerAlive(join(DIR, f)),
    );
  while (others().length > 0) {
    if (Date.now() > deadline) {
      release();
      throw late('RabbitMQ test files to release the broker');
    }
    await pause();
  }
  return release;
}
