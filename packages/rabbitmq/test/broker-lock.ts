// Test files of this package share one RabbitMQ; the broker-restart test must not pull it from under the
// others. Each file holds a shared lock while it runs; the restart test takes it exclusively, waiting for
// the files running in other workers to finish and keeping new ones out. Locks of dead processes are ignored.

import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';

const DIR = join(tmpdir(), 'inboxkit-rabbitmq-test-locks');
const EXCLUSIVE = join(DIR, 'exclusive');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function ownerAlive(file: string): boolean {
  try {
    return alive(Number(readFileSync(file, 'utf8')));
  } catch {
    return false;
  }
}

function exclusiveHeld(): boolean {
  return ownerAlive(join(EXCLUSIVE, 'owner'));
}

const pause = () => new Promise((r) => setTimeout(r, 100));

/** Holds a shared lock; resolves with its release. */
export async function sharedBrokerLock(): Promise<() => void> {
  mkdirSync(DIR, { recursive: true });
  const mine = join(DIR, `shared-${process.pid}-${randomBytes(4).toString('hex')}`);
  for (;;) {
    if (!exclusiveHeld()) {
      writeFileSync(mine, String(process.pid));
      if (!exclusiveHeld()) return () => rmSync(mine, { force: true });
      rmSync(mine, { force: true });
    }
    await pause();
  }
}

/** Holds the exclusive lock once no other live process holds a shared one; resolves with its release. */
export async function exclusiveBrokerLock(): Promise<() => void> {
  mkdirSync(DIR, { recursive: true });
  for (;;) {
    try {
      mkdirSync(EXCLUSIVE);
      writeFileSync(join(EXCLUSIVE, 'owner'), String(process.pid));
      break;
    } catch {
      if (!exclusiveHeld()) rmSync(EXCLUSIVE, { recursive: true, force: true });
      else await pause();
    }
  }
  const others = () =>
    readdirSync(DIR).filter(
      (f) => f.startsWith('shared-') && !f.startsWith(`shared-${process.pid}-`) && ownerAlive(join(DIR, f)),
    );
  while (others().length > 0) await pause();
  return () => rmSync(EXCLUSIVE, { recursive: true, force: true });
}

/** Holds the shared lock for the whole test file. */
export function useSharedBroker(): void {
  let release: (() => void) | undefined;
  beforeAll(async () => {
    release = await sharedBrokerLock();
  });
  afterAll(() => release?.());
}
