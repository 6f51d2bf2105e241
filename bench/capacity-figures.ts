// The pure half of bench/primary-capacity.ts: reading /proc/<pid>/stat and /proc/stat, turning CPU ticks into
// per-core rates, tallying the wait events sampled from pg_stat_activity, and naming the limit. No I/O here, so
// test/bench/capacity-figures.test.ts can check every rule against hand-made input.

/** The fields of one `/proc/<pid>/stat` line the measurement needs. */
export interface ProcStat {
  readonly pid: number;
  /** The command name between the parentheses (may itself contain spaces and parentheses). */
  readonly comm: string;
  readonly state: string;
  readonly ppid: number;
  /** User-mode CPU time, in clock ticks (`getconf CLK_TCK`, 100 on Linux). */
  readonly utime: number;
  /** Kernel-mode CPU time, in clock ticks. */
  readonly stime: number;
  /** When the process started, in clock ticks after boot. */
  readonly starttime: number;
}

/**
 * Parses one `/proc/<pid>/stat` line (proc(5)). The command name is everything between the first `(` and the
 * LAST `)`: a process may name itself `a) b (c`, so splitting on spaces would shift every later field.
 *
 * @throws Error when the line is not a stat line (no parentheses, or fewer fields than field 22).
 * @example parseProcStat('42 (postgres) S 1 42 42 0 -1 4194560 10 0 0 0 7 3 0 0 20 0 1 0 500 ...').utime // 7
 */
export function parseProcStat(line: string): ProcStat {
  const open = line.indexOf('(');
  const close = line.lastIndexOf(')');
  if (open <= 0 || close < open)
    throw new Error(`not a /proc/<pid>/stat line: ${JSON.stringify(line.slice(0, 80))}`);
  const pid = Number(line.slice(0, open).trim());
  // Fields after the name start at field 3 (state); field n of proc(5) is rest[n - 3].
  const rest = line
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  if (!Number.isInteger(pid) || rest.length < 20)
    throw new Error(`not a /proc/<pid>/stat line: ${JSON.stringify(line.slice(0, 80))}`);
  const field = (n: number): number => {
    const v = Number(rest[n - 3]);
    if (!Number.isFinite(v)) throw new Error(`/proc/${pid}/stat: field ${n} is not a number: ${rest[n - 3]}`);
    return v;
  };
  return {
    pid,
    comm: line.slice(open + 1, close),
    state: rest[0]!,
    ppid: field(4),
    utime: field(14),
    stime: field(15),
    starttime: field(22),
  };
}

/** Busy and total CPU time of the whole machine from the first line of `/proc/stat`, in clock ticks. */
export interface MachineTicks {
  readonly busy: number;
  readonly total: number;
}

/**
 * Reads the aggregate `cpu` line of `/proc/stat`: user nice system idle iowait irq softirq steal (guest time is
 * already inside user). Busy is everything but idle and iowait. Steal counts as busy: a core another guest took is
 * not a core this run could use.
 */
export function parseMachineStat(text: string): MachineTicks {
  const line = text.split('\n').find((l) => l.startsWith('cpu '));
  if (line === undefined) throw new Error('/proc/stat has no aggregate "cpu " line');
  const n = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (n.length < 4 || n.some((v) => !Number.isFinite(v)))
    throw new Error(`/proc/stat: unreadable cpu line: ${line}`);
  const total = n.reduce((a, b) => a + b, 0);
  const idle = n[3]! + (n[4] ?? 0);
  return { busy: total - idle, total };
}

/**
 * CPU ticks a set of processes spent between two readings. A process present at the start but gone at the end
 * is counted up to its last reading (`last`); one that appeared during the phase counts from zero — unless its
 * start time is before the phase (a pid we simply had not listed), then from its first reading.
 */
export function ticksSpent(
  first: ReadonlyMap<number, ProcStat>,
  last: ReadonlyMap<number, ProcStat>,
  phaseStartTicks: number,
): number {
  let ticks = 0;
  for (const [pid, end] of last) {
    const start = first.get(pid);
    if (start !== undefined && start.starttime === end.starttime)
      ticks += end.utime + end.stime - start.utime - start.stime;
    else if (end.starttime >= phaseStartTicks) ticks += end.utime + end.stime;
  }
  return ticks;
}

/** What a `pg_stat_activity` sample of one backend says it was doing. */
export type WaitClass = 'cpu' | 'node' | 'wal' | 'lock' | 'lwlock' | 'io' | 'other';

/**
 * Classifies one sample of a backend of the consumer's pool:
 * - `node`: idle, or idle in a transaction waiting for the client (`Client:ClientRead`) — Postgres waits on Node;
 * - `wal`: writing or flushing WAL (`IO:WALSync`, `IO:WALWrite`, `LWLock:WALWrite`, `LWLock:WALInsert`, …);
 * - `lock`: a heavyweight lock (`Lock:transactionid`, `Lock:tuple`: a concurrent duplicate, a row lock);
 * - `cpu`: active with no wait event (running, or runnable and waiting for a core the kernel has not given it);
 * - `lwlock` / `io` / `other`: the rest.
 */
export function classifyWait(
  state: string | null,
  waitType: string | null,
  waitEvent: string | null,
): WaitClass {
  if (waitType === 'Lock') return 'lock';
  if ((waitType === 'IO' || waitType === 'LWLock') && waitEvent !== null && /^WAL/.test(waitEvent))
    return 'wal';
  if (state === 'idle' || (waitType === 'Client' && waitEvent === 'ClientRead')) return 'node';
  if (state === 'active' && waitType === null) return 'cpu';
  if (waitType === 'LWLock') return 'lwlock';
  if (waitType === 'IO') return 'io';
  return 'other';
}

/** Shares of each class over all samples (they sum to 1; all zero when there are none). */
export function waitShares(classes: readonly WaitClass[]): Record<WaitClass, number> {
  const shares: Record<WaitClass, number> = { cpu: 0, node: 0, wal: 0, lock: 0, lwlock: 0, io: 0, other: 0 };
  for (const c of classes) shares[c] += 1;
  for (const k of Object.keys(shares) as WaitClass[])
    shares[k] = classes.length === 0 ? 0 : shares[k] / classes.length;
  return shares;
}

/** CPU seconds one phase cost, by whom. */
export interface PhaseCpu {
  /** The bench's own Node process (process.cpuUsage: user + system). */
  readonly node: number;
  /** The Postgres backends of the consumer's pool. */
  readonly backends: number;
  /** The server's own processes (postmaster, WAL writer, checkpointer, background writer, autovacuum). Shared:
   * they also serve other clients' writes, so this is an upper bound of the phase's share. */
  readonly background: number;
}

/** The per-core figures of one phase. */
export interface PerCore {
  /** Messages per CPU-second of Node + its backends + the server's background processes. */
  readonly perCore: number;
  /** Messages per CPU-second of Postgres alone (backends + background): the primary's side, with Node elsewhere. */
  readonly perPostgresCore: number;
  /** Messages per CPU-second of Node alone: one consumer process's ceiling per core. */
  readonly perNodeCore: number;
  /** Share of the phase's CPU spent in Node (0..1). */
  readonly nodeShare: number;
}

/**
 * Messages per second per core, from CPU actually spent rather than wall time: robust to other work on the
 * machine, which slows the wall clock but not the CPU a message costs (cache and scheduler effects aside).
 *
 * @throws RangeError when there are no messages or no CPU time (nothing was measured).
 */
export function perCore(messages: number, cpu: PhaseCpu): PerCore {
  const postgres = cpu.backends + cpu.background;
  const all = cpu.node + postgres;
  if (!(messages > 0) || !(all > 0))
    throw new RangeError(`nothing measured: ${messages} messages in ${all} CPU seconds`);
  return {
    perCore: messages / all,
    perPostgresCore: postgres > 0 ? messages / postgres : Number.NaN,
    perNodeCore: cpu.node > 0 ? messages / cpu.node : Number.NaN,
    nodeShare: cpu.node / all,
  };
}

/** What one phase's readings say about the limit. */
export interface LimitInput {
  readonly wallSeconds: number;
  readonly cores: number;
  /** Busy CPU seconds of the whole machine over the phase (everyone's). */
  readonly machineBusy: number;
  readonly cpu: PhaseCpu;
  readonly waits: Record<WaitClass, number>;
}

/**
 * Names the limit of a phase, first match wins:
 * 1. `machine CPU` — the machine's cores were ≥ 90% busy (ours plus everyone else's): no idle core was left;
 * 2. `Node CPU` — the Node process used ≥ 90% of one core (its event loop is one thread);
 * 3. `WAL flush` — the pool's backends spent ≥ 30% of samples in WAL waits;
 * 4. `row locks` — ≥ 20% of samples in heavyweight-lock waits;
 * 5. `Postgres CPU` — ≥ 50% of samples running;
 * 6. else `round trips` — backends mostly waiting for Node between statements with CPU to spare: latency, not a
 *    resource, sets the pace (raise the concurrency or batch).
 */
export function limitOf(input: LimitInput): { limit: string; why: string } {
  const pct = (v: number): string => `${(v * 100).toFixed(0)}%`;
  const machine = input.machineBusy / (input.wallSeconds * input.cores);
  const node = input.cpu.node / input.wallSeconds;
  const ours = (input.cpu.node + input.cpu.backends + input.cpu.background) / input.machineBusy;
  if (machine >= 0.9)
    return {
      limit: 'machine CPU',
      why: `the ${input.cores} cores were ${pct(machine)} busy, ${pct(Math.min(1, ours))} of it this run's (Node ${pct(node)} of a core)`,
    };
  if (node >= 0.9)
    return { limit: 'Node CPU', why: `the Node process used ${pct(node)} of a core (one event loop)` };
  if (input.waits.wal >= 0.3)
    return { limit: 'WAL flush', why: `backends waited on WAL in ${pct(input.waits.wal)} of samples` };
  if (input.waits.lock >= 0.2)
    return { limit: 'row locks', why: `backends waited on locks in ${pct(input.waits.lock)} of samples` };
  if (input.waits.cpu >= 0.5)
    return { limit: 'Postgres CPU', why: `backends were running in ${pct(input.waits.cpu)} of samples` };
  return {
    limit: 'round trips',
    why: `backends waited for Node in ${pct(input.waits.node)} of samples with the machine ${pct(machine)} busy`,
  };
}

/** Difference of two readings of counters (after − before), key by key; missing or non-numeric keys are NaN. */
export function counterDelta<K extends string>(
  before: Readonly<Record<K, number | string | null>>,
  after: Readonly<Record<K, number | string | null>>,
  keys: readonly K[],
): Record<K, number> {
  const out = {} as Record<K, number>;
  for (const k of keys) {
    const a = Number(after[k]);
    const b = Number(before[k]);
    out[k] = after[k] === null || before[k] === null ? Number.NaN : a - b;
  }
  return out;
}
