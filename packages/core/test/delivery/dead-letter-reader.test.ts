import { describe, expect, it } from 'vitest';
import { deadLetterEntry, deadLetterId, HEADERS, takenDeadLetter } from '../../src/index.js';

describe('deadLetterId / deadLetterEntry', () => {
  it('prefers the original id, falls back to the message id, and reads an empty header as none', () => {
    expect(deadLetterId({ [HEADERS.originalId]: 'orig', [HEADERS.messageId]: 'copy' })).toBe('orig');
    expect(deadLetterId({ [HEADERS.messageId]: 'copy' })).toBe('copy');
    expect(deadLetterId({})).toBeUndefined();
    expect(deadLetterId({ [HEADERS.messageId]: '' })).toBeUndefined();
  });

  it('builds the entry with the transport fields', () => {
    const headers = { [HEADERS.messageId]: 'm-1' };
    expect(deadLetterEntry(headers, 'body', 'q#0', { key: 'k' })).toEqual({
      id: 'm-1',
      body: 'body',
      headers,
      position: 'q#0',
      key: 'k',
    });
  });
});

describe('takenDeadLetter', () => {
  const entry = deadLetterEntry({ [HEADERS.messageId]: 'm-1' }, null, 'q#0');

  it('removes once, and a removed entry is never released', async () => {
    const calls: string[] = [];
    const taken = takenDeadLetter(entry, {
      remove: () => void calls.push('remove'),
      release: () => void calls.push('release'),
    });
    await taken.remove();
    await taken.remove();
    await taken.release();
    expect(calls).toEqual(['remove']);
    expect(taken.id).toBe('m-1');
  });

  it('releases once, and a released entry is never removed', async () => {
    const calls: string[] = [];
    const taken = takenDeadLetter(entry, {
      remove: () => void calls.push('remove'),
      release: () => void calls.push('release'),
    });
    await taken.release();
    await taken.release();
    await taken.remove();
    expect(calls).toEqual(['release']);
  });

  it('a failed remove leaves it unsettled: the next remove tries again', async () => {
    let attempts = 0;
    const taken = takenDeadLetter(entry, {
      remove: () => {
        attempts++;
        if (attempts === 1) throw new Error('broker down');
      },
    });
    await expect(taken.remove()).rejects.toThrow('broker down');
    await taken.remove();
    await taken.remove();
    expect(attempts).toBe(2);
  });
});
