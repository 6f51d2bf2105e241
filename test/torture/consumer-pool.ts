// The torture run's consumer processes: starts N of them, SIGKILLs one on demand and starts it again, restarts
// any that die on their own (and counts those exits), stops them all with SIGTERM at the end, and tallies the
// outcome lines they print.

import { spawn } from 'node:child_process';
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import type { OutcomeStatus } from '@inboxkit/core';

import type { ConsumerSettings } from './consumer-settings.js';
import { OUTCOME_BY_CODE } from './consumer-settings.js';

const ENTRY = fileURLToPath(new URL('./consumer-process.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const STDERR_KEPT = 20_000;

/** Every consumer process alive, across pools: killed when the harness itself is interrupted. */
const LIVE = new Set<ChildProcess>();

/** SIGKILLs every consumer process still running (the harness is being interrupted). */
export function killAllConsumers(): void {
  for (const child of LIVE) child.kill('SIGKILL');
  LIVE.clear();
}

/** Outcome statistics from the consumers' output (a process killed mid-line loses at most that line). */
export class OutcomeTally {
  readonly byStatus: Record<OutcomeStatus, number> = {
    processed: 0,
    duplicate: 0,
    retry: 0,
    'dead-letter': 0,
  };
  /** Ids that got at least one final answer (processed, duplicate, dead-letter). */
  readonly answered = new Set<string>();
  /** Final answers beyond an id's first: every one is a duplicate delivery. */
  duplicateDeliveries = 0;
  /** `processed` answers beyond an id's first processed one (each a second commit: never in a correct run). */
  processedAgain = 0;
  readonly #processed = new Set<string>();

  add(status: OutcomeStatus, id: string): void {
    this.byStatus[status] += 1;
    if (status === 'retry') return;
    if (this.answered.has(id)) this.duplicateDeliveries += 1;
    else this.answered.add(id);
    if (status === 'processed') {
      if (this.#processed.has(id)) this.processedAgain += 1;
      else this.#processed.add(id);
    }
  }

  get deliveries(): number {
    return (
      this.byStatus.processed + this.byStatus.duplicate + this.byStatus.retry + this.byStatus['dead-letter']
    );
  }
}

interface Slot {
  readonly index: number;
  child: ChildProcess | undefined;
  ready: boolean;
  /** Set when the harness killed or stopped it on purpose. */
  expectedExit: boolean;
  exited: Promise<void>;
  stderr: string;
  restartTimer: NodeJS.Timeout | undefined;
}

export interface ConsumerPoolOptions {
  readonly count: number;
  readonly settings: (index: number) => ConsumerSettings;
  /** Logs a line of the harness's progress. */
  readonly log: (line: string) => void;
  /** Where each consumer's stderr is appended in full (`consumer-<index>.log`). */
  readonly logDir: string;
  /** The process's entry file (the pipeline's service and relay). Default is consumer-process.ts. */
  readonly entry?: string;
  /** Prefix of the log files and of the pool's log lines. Default is `consumer`. */
  readonly role?: string;
}

export class ConsumerPool {
  readonly tally = new OutcomeTally();
  kills = 0;
  starts = 0;
  /** Exits the harness did not cause (a consumer crashed on its own). */
  readonly unexpectedExits: string[] = [];
  readonly #options: ConsumerPoolOptions;
  readonly #slots: Slot[];
  #closing = false;
  #readyWaiters: (() => void)[] = [];

  constructor(options: ConsumerPoolOptions) {
    this.#options = options;
    mkdirSync(options.logDir, { recursive: true });
    this.#slots = Array.from({ length: options.count }, (_, index) => ({
      index,
      child: undefined,
      ready: false,
      expectedExit: false,
      exited: Promise.resolve(),
      stderr: '',
      restartTimer: undefined,
    }));
  }

  /** Starts every consumer and waits until all print `ready`. */
  async startAll(timeoutMs = 120_000): Promise<void> {
    for (const slot of this.#slots) this.#start(slot);
    await this.waitUntil(() => this.#slots.every((s) => s.ready), timeoutMs, 'every consumer ready');
  }

  /** Slots whose process is up and consuming. */
  readyIndexes(): number[] {
    return this.#slots.filter((s) => s.ready).map((s) => s.index);
  }

  /** The process id of consumer `index` while it runs (the effects table records it per row). */
  pidOf(index: number): number | undefined {
    return this.#slots[index]?.child?.pid;
  }

  /** SIGKILLs consumer `index` and starts it again after `restartAfterMs`. */
  async kill(index: number, restartAfterMs: number): Promise<void> {
    const slot = this.#slots[index]!;
    if (slot.child === undefined) return;
    slot.expectedExit = true;
    slot.ready = false;
    slot.child.kill('SIGKILL');
    this.kills += 1;
    await slot.exited;
    slot.restartTimer = setTimeout(() => {
      slot.restartTimer = undefined;
      if (!this.#closing) this.#start(slot);
    }, restartAfterMs);
  }

  /** Makes sure every slot has a live process (after the chaos phase), and waits until all are ready. */
  async ensureAllRunning(timeoutMs = 120_000): Promise<void> {
    for (const slot of this.#slots) {
      if (slot.restartTimer !== undefined) {
        clearTimeout(slot.restartTimer);
        slot.restartTimer = undefined;
      }
      if (slot.child === undefined) this.#start(slot);
    }
    await this.waitUntil(() => this.#slots.every((s) => s.ready), timeoutMs, 'every consumer ready again');
  }

  /** SIGTERM to all (graceful stop: drain, settle), SIGKILL after `timeoutMs`. */
  async stopAll(timeoutMs = 45_000): Promise<void> {
    this.#closing = true;
    for (const slot of this.#slots) {
      if (slot.restartTimer !== undefined) clearTimeout(slot.restartTimer);
      slot.expectedExit = true;
      slot.child?.kill('SIGTERM');
    }
    const all = Promise.all(this.#slots.map((s) => s.exited));
    const timer = setTimeout(() => {
      for (const slot of this.#slots) {
        if (slot.child !== undefined) {
          this.#options.log(`consumer ${slot.index} did not stop within ${timeoutMs} ms: SIGKILL`);
          slot.child.kill('SIGKILL');
        }
      }
    }, timeoutMs);
    await all;
    clearTimeout(timer);
  }

  /** Resolves when `condition()` holds (checked at each consumer event and every 250 ms), rejects after the timeout. */
  async waitUntil(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for ${what}; consumer stderr:\n${this.stderrTail()}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 250);
        this.#readyWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** The last lines each consumer wrote to stderr. */
  stderrTail(lines = 8): string {
    return this.#slots
      .map((s) => `[consumer ${s.index}]\n${s.stderr.trimEnd().split('\n').slice(-lines).join('\n')}`)
      .join('\n');
  }

  #notify(): void {
    const waiters = this.#readyWaiters;
    this.#readyWaiters = [];
    for (const w of waiters) w();
  }

  #start(slot: Slot): void {
    const settings = this.#options.settings(slot.index);
    const child = spawn(
      process.execPath,
      [
        '--conditions=@inboxkit/source',
        '--import',
        'tsx',
        this.#options.entry ?? ENTRY,
        JSON.stringify(settings),
      ],
      {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    this.starts += 1;
    LIVE.add(child);
    slot.child = child;
    slot.ready = false;
    slot.expectedExit = false;
    const logFile = join(this.#options.logDir, `${this.#options.role ?? 'consumer'}-${slot.index}.log`);
    appendFileSync(logFile, `--- start ${new Date().toISOString()} pid ${child.pid}\n`);
    child.stderr.on('data', (d: Buffer) => {
      slot.stderr = (slot.stderr + d.toString()).slice(-STDERR_KEPT);
      appendFileSync(logFile, d);
    });
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      if (line === 'ready') {
        slot.ready = true;
        this.#notify();
        return;
      }
      if (line.startsWith('o ')) {
        const space = line.indexOf(' ', 2);
        const status = OUTCOME_BY_CODE[line.slice(2, space)];
        if (status !== undefined) this.tally.add(status, line.slice(space + 1));
      }
    });
    slot.exited = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        LIVE.delete(child);
        appendFileSync(logFile, `--- exit ${new Date().toISOString()} ${signal ?? `code ${code}`}\n`);
        const wasReady = slot.ready;
        if (slot.child === child) {
          slot.child = undefined;
          slot.ready = false;
        }
        if (!slot.expectedExit) {
          const what = `consumer ${slot.index} exited by itself ${wasReady ? 'while consuming' : 'while starting'} (${signal ?? `code ${code}`}): ${firstError(slot.stderr)}`;
          this.unexpectedExits.push(what);
          this.#options.log(`${what}; starting it again`);
          if (!this.#closing) {
            slot.restartTimer = setTimeout(() => {
              slot.restartTimer = undefined;
              if (!this.#closing) this.#start(slot);
            }, 1_000);
          }
        }
        this.#notify();
        slot.stderr = '';
        resolve();
      });
    });
  }
}

/** The uncaught error Node printed before the process died (else the last line of its stderr). */
function firstError(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  // Node prints the throwing source line, a caret under it, then the error.
  const caret = lines.findLastIndex((l) => /^\^+$/.test(l));
  const uncaught = caret >= 0 ? lines.slice(caret + 1).find((l) => !l.startsWith('at ')) : undefined;
  const unhandled = lines.some((l) => l.includes("Unhandled 'error' event"))
    ? " (unhandled 'error' event)"
    : '';
  const fatal = uncaught ?? lines.findLast((l) => /^[A-Z][A-Za-z]*(Error|Exception)\b/.test(l));
  return `${(fatal ?? lines.at(-1) ?? '(no output)').slice(0, 300)}${unhandled}`;
}
