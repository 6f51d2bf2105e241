// `dlq list` grouping and annotation, on in-process ports.

import { describe, expect, it } from 'vitest';

import { errorShape, listDeadLetters } from '../../src/replay/list-dead-letters.js';
import { deadLetter, MemoryDeadLetterQueue, MemoryInbox } from '../support/memory-ports.js';

describe('listDeadLetters', () => {
  it('groups by consumer, reason and error shape, with the inbox status of each id, and removes nothing', async () => {
    const inbox = new MemoryInbox();
    inbox.set('orders', 'a', 'dead_lettered');
    inbox.set('orders', 'b', 'completed');
    const withError = (id: string, message: string, reason = 'max-attempts') => {
      const e = deadLetter(id, { reason });
      return { ...e, headers: { ...e.headers, 'x-inboxkit-error-message': message } };
    };
    const dlq = new MemoryDeadLetterQueue(
      [
        withError('a', 'timeout after 5012 ms'),
        withError('b', 'timeout after 4999 ms'),
        withError('c', 'timeout after 77 ms'),
        withError('d', 'order "X-1" not found', 'permanent-error'),
      ],
      'queue',
    );
    const listing = await listDeadLetters({ reader: dlq, inbox });
    expect(dlq.entries).toHaveLength(4);
    expect(listing.groups.map((g) => [g.reason, g.count, g.errorShape, g.inboxStatuses])).toEqual([
      ['max-attempts', 3, 'Error: timeout after <n> ms', { dead_lettered: 1, completed: 1, none: 1 }],
      ['permanent-error', 1, 'Error: order <value> not found', { none: 1 }],
    ]);
    expect(listing.entries.map((e) => [e.id, e.prediction])).toEqual([
      ['a', 'reopen'],
      ['b', 'skip-duplicate'],
      ['c', 'process'],
      ['d', 'process'],
    ]);
    expect(listing.nonDestructiveBrowse).toBe(false);
  });

  it('marks a dead letter parked when a replay reopened its row and it was dead-lettered again', async () => {
    const inbox = new MemoryInbox();
    inbox.set('orders', 'fresh', 'dead_lettered');
    inbox.set('orders', 'again', 'dead_lettered');
    inbox.rows.get('orders\u0000again')!.replays.push('r-1');
    inbox.set('orders', 'done', 'completed');
    inbox.rows.get('orders\u0000done')!.replays.push('r-1');
    const dlq = new MemoryDeadLetterQueue(['fresh', 'again', 'done'].map((id) => deadLetter(id)));
    const listing = await listDeadLetters({ reader: dlq, inbox });
    expect(listing.entries.map((e) => [e.id, e.parked])).toEqual([
      ['fresh', false],
      ['again', true],
      ['done', false],
    ]);
    const unread = await listDeadLetters({ reader: dlq });
    expect(unread.entries.every((e) => !e.parked)).toBe(true);
  });

  it('applies the filter and the limit', async () => {
    const dlq = new MemoryDeadLetterQueue(
      ['a', 'b', 'c'].map((id) =>
        deadLetter(id, { reason: id === 'b' ? 'permanent-error' : 'max-attempts' }),
      ),
    );
    const listing = await listDeadLetters({ reader: dlq, filter: { reasons: ['max-attempts'] }, limit: 2 });
    expect(listing.entries.map((e) => e.id)).toEqual(['a']);
    expect(listing.read).toBe(2);
    expect(listing.truncated).toBe(true);
    expect(listing.entries[0]!.inboxStatus).toBe('unknown');
  });

  it('shapes error messages so similar failures group together', () => {
    expect(errorShape('Error: user 3f2b6c1e-1111-4a4a-8b8b-123456789abc missing')).toBe(
      'Error: user <uuid> missing',
    );
    expect(errorShape('Error: tx deadbeefcafe1234 failed after 3 tries')).toBe(
      'Error: tx <hex> failed after <n> tries',
    );
  });
});
