// What the transports' crash tests share: a consumer process started from a fixture (resolved once it prints
// READY), waiting for its exit, polling a broker or database state with a deadline, and the crash loop — a
// message that kills its process on every attempt, restarted until the source is settled, counting the deaths.

import { spawn } from 'node:child_process';
import type { ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

import { expect } from 'vitest';

/** A consumer process and what it printed so far. */
export type ConsumerChild = ChildProcessByStdio<null, Readable, Readable>;
export interface ConsumerProcess {
  readonly child: ConsumerChild;
  readonly output: () => string;
}

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Runs `fixture` (a TypeScript file, through tsx and the source condition) with `settings` as its one JSON
 * argument, from the repository's root; resolves once it prints `READY`, rejects (with its stderr) if it exits
 * before.
 */
export async function startConsumerProcess(fixture: string, settings: object): Promise<ConsumerProcess> {
  const child = spawn(
    process.execPath,
    ['--conditions=@inboxkit/source', '--import', 'tsx', fixture, JSON.stringify(settings)],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', () => {
      if (out.includes('READY\n')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`consumer process exited with ${String(code)} before READY:\n${err}`)));
  });
  return { child, output: () => out };
}

/** Resolves once `child` has exited (at once if it has). */
export async function exited(child: ConsumerChild): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => child.once('exit', () => resolve()));
}

/** Polls until `condition` holds (a database or broker state, not a message); throws after `timeoutMs`. */
export async function until(what: string, condition: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(25);
  }
}

/** The crash loop of `deathsUntilDeadLettered`. */
export interface CrashLoop {
  /** Starts one consumer process whose handler kills it on `crasher`. */
  readonly start: () => Promise<ConsumerProcess>;
  /** True once the source holds nothing more to deliver or settle. */
  readonly settled: () => Promise<boolean>;
  /** The settled state, for the timeout's message (`the queue is empty`). */
  readonly what: string;
  /** How long one process may take to settle the source. */
  readonly timeoutMs: number;
  readonly crasher: string;
  readonly maxAttempts: number;
}

/**
 * Starts consumer processes one after the other until one settles the source: each that dies meanwhile must
 * have been SIGKILLed (by the crasher), and no more than `maxAttempts + 1` may die; the one that settles it must
 * have dead-lettered the crasher. Returns how many died.
 */
export async function deathsUntilDeadLettered(loop: CrashLoop): Promise<number> {
  let deaths = 0;
  for (;;) {
    const { child, output } = await loop.start();
    const died = new Promise<'died'>((resolve) => child.once('exit', () => resolve('died')));
    const done = until(loop.what, loop.settled, loop.timeoutMs).then(() => 'done' as const);
    const outcome = await Promise.race([died, done]);
    if (outcome === 'done') {
      child.kill('SIGTERM');
      await exited(child);
      expect(output()).toContain(`OUTCOME dead-letter ${loop.crasher}`);
      return deaths;
    }
    expect(child.signalCode).toBe('SIGKILL');
    deaths += 1;
    expect(deaths, 'the crash loop never reached the DLQ').toBeLessThanOrEqual(loop.maxAttempts + 1);
  }
}

/** Stops a consumer process as a deployment does (SIGTERM) and waits for its exit. */
export async function stopConsumerProcess(child: ConsumerChild): Promise<void> {
  child.kill('SIGTERM');
  await exited(child);
}

/** Every one of `ids` has exactly one effect in `counts` (effects by id): none missing, none applied twice. */
export function expectEachAppliedOnce(ids: readonly string[], counts: ReadonlyMap<string, number>): void {
  expect(
    ids.filter((id) => !counts.has(id)),
    'missing',
  ).toEqual([]);
  expect(
    [...counts].filter(([, n]) => n !== 1),
    'applied more than once',
  ).toEqual([]);
}
