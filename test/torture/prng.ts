// A small seeded PRNG (sfc32) so that every random choice of a torture run (the message stream, which ids are
// duplicated or poisoned, kill times, victims, restart moments) follows from one printed seed. Timing still
// varies between runs: a failing seed reproduces the same plan, not the same interleaving.

import { createHash } from 'node:crypto';

/** A deterministic source of random numbers. */
export interface Random {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [min, max]. */
  int(min: number, max: number): number;
  /** True with probability `p`. */
  chance(p: number): boolean;
  /** One element of a non-empty list. */
  pick<T>(items: readonly T[]): T;
  /** A new, independent stream derived from this one's seed and `label`. */
  fork(label: string): Random;
}

/** A fresh 32-bit seed from the OS, for runs without `--seed`. */
export function randomSeed(): number {
  return createHash('sha256')
    .update(`${process.pid}:${process.hrtime.bigint()}:${Math.random()}`)
    .digest()
    .readUInt32BE(0);
}

/** The PRNG of `seed`, optionally specialised by `label` (e.g. the transport name). */
export function seededRandom(seed: number | string, label = ''): Random {
  const digest = createHash('sha256').update(`${seed}/${label}`).digest();
  let a = digest.readUInt32LE(0);
  let b = digest.readUInt32LE(4);
  let c = digest.readUInt32LE(8);
  let d = digest.readUInt32LE(12);
  const next = (): number => {
    // sfc32
    a >>>= 0;
    b >>>= 0;
    c >>>= 0;
    d >>>= 0;
    let t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    t = (t + d) | 0;
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  for (let i = 0; i < 12; i++) next();
  const random: Random = {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    chance: (p) => next() < p,
    pick: (items) => items[Math.floor(next() * items.length)]!,
    fork: (sub) => seededRandom(seed, `${label}/${sub}`),
  };
  return random;
}
