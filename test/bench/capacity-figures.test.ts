// The pure half of the one-primary capacity measurement (bench/primary-capacity.ts): /proc parsing, CPU ticks
// per phase, per-core rates, wait classes and the limit named. No services needed.

import { describe, expect, it } from 'vitest';

import {
  classifyWait,
  counterDelta,
  limitOf,
  parseMachineStat,
  parseProcStat,
  perCore,
  ticksSpent,
  waitShares,
  type ProcStat,
} from '../../bench/capacity-figures.js';

// A real line of a Postgres backend (proc(5): pid comm state ppid … utime(14) stime(15) … starttime(22) …).
const BACKEND =
  '31337 (postgres) S 24182 24182 24182 0 -1 4194560 1536 0 0 0 412 97 0 0 20 0 1 0 1290000 226000896 3521 18446744073709551615 1 1 0 0 0 0 4194304 19935232 84483 0 0 0 17 1 0 0 0 0 0';

describe('parseProcStat', () => {
  it('reads pid, name, parent, user and system ticks and the start time', () => {
    expect(parseProcStat(BACKEND)).toEqual({
      pid: 31337,
      comm: 'postgres',
      state: 'S',
      ppid: 24182,
      utime: 412,
      stime: 97,
      starttime: 1290000,
    });
  });

  it('takes the name up to the LAST parenthesis, so a name with spaces and ")" does not shift the fields', () => {
    const odd = BACKEND.replace('(postgres)', '(evil) S 1 2 (x)');
    const s = parseProcStat(odd);
    expect(s.comm).toBe('evil) S 1 2 (x');
    expect([s.ppid, s.utime, s.stime, s.starttime]).toEqual([24182, 412, 97, 1290000]);
  });

  it('refuses what is not a stat line', () => {
    expect(() => parseProcStat('')).toThrow(/not a \/proc/);
    expect(() => parseProcStat('12 (short) S 1 2 3')).toThrow(/not a \/proc/);
  });
});

describe('parseMachineStat', () => {
  it('counts everything but idle and iowait as busy, steal included', () => {
    const text = 'cpu  100 5 50 1000 20 3 2 10 0 0\ncpu0 50 2 25 500 10 1 1 5 0 0\nintr 1\n';
    expect(parseMachineStat(text)).toEqual({ busy: 100 + 5 + 50 + 3 + 2 + 10, total: 1190 });
  });

  it('fails without the aggregate line', () => {
    expect(() => parseMachineStat('cpu0 1 2 3 4\n')).toThrow(/no aggregate/);
  });
});

const proc = (pid: number, utime: number, stime: number, starttime = 100): ProcStat => ({
  pid,
  comm: 'postgres',
  state: 'S',
  ppid: 1,
  utime,
  stime,
  starttime,
});

describe('ticksSpent', () => {
  it('sums each process’s user + system ticks between the two readings', () => {
    const first = new Map([
      [1, proc(1, 10, 5)],
      [2, proc(2, 100, 50)],
    ]);
    const last = new Map([
      [1, proc(1, 30, 10)],
      [2, proc(2, 101, 50)],
    ]);
    expect(ticksSpent(first, last, 1_000)).toBe(20 + 5 + 1);
  });

  it('counts a process started during the phase from zero, and skips one it cannot place', () => {
    const first = new Map([[1, proc(1, 10, 5)]]);
    const last = new Map([
      [1, proc(1, 10, 5)],
      [7, proc(7, 40, 2, 1_500)], // an autovacuum worker that started in the phase
      [8, proc(8, 999, 999, 500)], // listed late, started before: its earlier ticks are not the phase's
    ]);
    expect(ticksSpent(first, last, 1_000)).toBe(42);
  });

  it('does not subtract across a reused pid (a different start time)', () => {
    const first = new Map([[3, proc(3, 500, 500, 200)]]);
    const last = new Map([[3, proc(3, 4, 1, 1_200)]]);
    expect(ticksSpent(first, last, 1_000)).toBe(5);
  });
});

describe('perCore', () => {
  it('divides messages by the CPU seconds of Node, backends and server processes', () => {
    const r = perCore(6_000, { node: 1, backends: 1.5, background: 0.5 });
    expect(r.perCore).toBe(2_000);
    expect(r.perPostgresCore).toBe(3_000);
    expect(r.perNodeCore).toBe(6_000);
    expect(r.nodeShare).toBeCloseTo(1 / 3);
  });

  it('refuses a phase that measured nothing', () => {
    expect(() => perCore(0, { node: 1, backends: 1, background: 0 })).toThrow(RangeError);
    expect(() => perCore(10, { node: 0, backends: 0, background: 0 })).toThrow(RangeError);
  });
});

describe('classifyWait and waitShares', () => {
  it('puts each pg_stat_activity sample in its class', () => {
    expect(classifyWait('active', null, null)).toBe('cpu');
    expect(classifyWait('idle', 'Client', 'ClientRead')).toBe('node');
    expect(classifyWait('idle in transaction', 'Client', 'ClientRead')).toBe('node');
    expect(classifyWait('active', 'IO', 'WALSync')).toBe('wal');
    expect(classifyWait('active', 'LWLock', 'WALWrite')).toBe('wal');
    expect(classifyWait('active', 'Lock', 'transactionid')).toBe('lock');
    expect(classifyWait('active', 'LWLock', 'BufferContent')).toBe('lwlock');
    expect(classifyWait('active', 'IO', 'DataFileRead')).toBe('io');
    expect(classifyWait('active', 'IPC', 'ProcArrayGroupUpdate')).toBe('other');
  });

  it('gives shares that sum to one', () => {
    const s = waitShares(['cpu', 'cpu', 'wal', 'node']);
    expect(s).toMatchObject({ cpu: 0.5, wal: 0.25, node: 0.25, lock: 0 });
    expect(Object.values(s).reduce((a, b) => a + b, 0)).toBe(1);
    expect(waitShares([]).cpu).toBe(0);
  });
});

describe('limitOf', () => {
  const none = { cpu: 0, node: 0, wal: 0, lock: 0, lwlock: 0, io: 0, other: 0 };
  const base = {
    wallSeconds: 10,
    cores: 2,
    machineBusy: 8,
    cpu: { node: 4, backends: 3, background: 1 },
    waits: none,
  };

  it('names a saturated machine first', () => {
    expect(limitOf({ ...base, machineBusy: 19 }).limit).toBe('machine CPU');
  });
  it('then a Node process using a whole core', () => {
    expect(limitOf({ ...base, cpu: { node: 9.5, backends: 3, background: 1 }, machineBusy: 14 }).limit).toBe(
      'Node CPU',
    );
  });
  it('then WAL waits, lock waits, running backends, and otherwise round trips', () => {
    expect(limitOf({ ...base, waits: { ...none, wal: 0.4, lock: 0.3 } }).limit).toBe('WAL flush');
    expect(limitOf({ ...base, waits: { ...none, wal: 0.1, lock: 0.3 } }).limit).toBe('row locks');
    expect(limitOf({ ...base, waits: { ...none, cpu: 0.6 } }).limit).toBe('Postgres CPU');
    expect(limitOf({ ...base, waits: { ...none, node: 0.8 } })).toEqual({
      limit: 'round trips',
      why: 'backends waited for Node in 80% of samples with the machine 40% busy',
    });
  });
});

describe('counterDelta', () => {
  it('subtracts counters read as strings (pg returns bigint as text) and marks a missing one NaN', () => {
    const d = counterDelta({ a: '10', b: 3, c: null }, { a: '25', b: 3, c: 7 }, ['a', 'b', 'c']);
    expect(d.a).toBe(15);
    expect(d.b).toBe(0);
    expect(d.c).toBeNaN();
  });
});
