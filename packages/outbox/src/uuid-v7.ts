// Time-ordered message ids (RFC 9562 UUIDv7), monotonic within a process, so the outbox's id order is its
// enqueue order and a broker-side id sorts like the outbox.

import { randomBytes } from 'node:crypto';

let lastMs = 0;
let sequence = 0;

/**
 * A new UUIDv7: 48 bits of Unix milliseconds, then a 12-bit counter that keeps ids strictly increasing within a
 * millisecond in this process (and a clock that steps back), then 62 random bits.
 *
 * @example
 * uuidv7() // '019d4a5c-7e1b-7000-8a3f-5c2e9b1d0f4a'
 */
export function uuidv7(now: number = Date.now()): string {
  let ms = now;
  if (ms <= lastMs) {
    ms = lastMs;
    sequence++;
    if (sequence > 0xfff) {
      ms = lastMs + 1;
      sequence = 0;
    }
  } else {
    sequence = 0;
  }
  lastMs = ms;
  const bytes = randomBytes(16);
  bytes.writeUIntBE(ms, 0, 6);
  bytes[6] = 0x70 | (sequence >> 8);
  bytes[7] = sequence & 0xff;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
