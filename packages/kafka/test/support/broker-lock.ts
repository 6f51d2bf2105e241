// A readers-writer lock across test processes, on files: test files that use the broker hold it shared; the
// broker-restart test holds it exclusively, so it never restarts Kafka under another file's feet. Holders are
// files named after their pid; files of dead processes are ignored, so a killed run leaves no stale lock.
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const DIR = join(tmpdir(), 'inboxkit-test-locks', 'kafka');
const EXCLUSIVE = 'exclusive';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Live holders of `kind` (`shared` or `exclusive`), other than `except`. */
function holders(kind: string, except?: string): string[] {
  mkdirSync(DIR, { recursive: true });
  return readdirSync(DIR).filter((name) => {
    if (!name.startsWith(`${kind}-`) || name === except) return false;
    const pid = Number(name.split('-')[1]);
    if (alive(pid)) return true;
    rmSync(join(DIR, name), { force: true });
    return false;
  });
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Holds the lock shared (many test files at once); resolves to the release function. */
export async function holdBrokerShared(): Promise<() => void> {
  const name = `shared-${process.pid}-${Math.random().toString(36).slice(2)}`;
  const file = join(DIR, name);
  for (;;) {
    mkdirSync(DIR, { recursive: true });
    writeFileSync(file, '');
    if (holders(EXCLUSIVE).length === 0) return () => rmSync(file, { force: true });
    rmSync(file, { force: true });
    await pause(200);
  }
}

/** Holds the lock exclusively (no other test file uses the broker meanwhile); resolves to the release function. */
export async function holdBrokerExclusive(timeoutMs: number): Promise<() => void> {
  const deadline = Date.now() + timeoutMs;
  const name = `${EXCLUSIVE}-${process.pid}-${Math.random().toString(36).slice(2)}`;
  const file = join(DIR, name);
  // One writer at a time (ties go to the smaller name); then wait for the readers to leave — new readers back
  // off while our file exists.
  for (;;) {
    while (holders(EXCLUSIVE).length > 0) await pause(200);
    writeFileSync(file, '');
    if (!holders(EXCLUSIVE, name).some((other) => other < name)) break;
    rmSync(file, { force: true });
  }
  const release = () => rmSync(file, { force: true });
  while (holders('shared').length > 0) {
    if (Date.now() > deadline) {
      release();
      throw new Error(
        `other Kafka test files kept the broker for ${timeoutMs} ms: ${holders('shared').join(', ')}`,
      );
    }
    await pause(200);
  }
  return release;
}
