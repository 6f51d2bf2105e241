// The stream a torture run sends, decided up front from the seed: distinct ids, ~30% of the sends repeating
// an id already planned (same id, same payload; half right after the original, half later in the stream),
// ~1% of the ids poison (half rejected by the handler with a PermanentError, half failing the schema), and a
// few ids whose first attempt fails after writing its effect (the effect must roll back).

import type { Random } from './prng.js';

export type MessageKind = 'ok' | 'transient' | 'permanent' | 'schema-invalid';

export interface PlannedMessage {
  readonly id: string;
  readonly kind: MessageKind;
  /** The JSON body: identical for every copy of an id. */
  readonly body: string;
  /** Partition key (Kafka). */
  readonly key: string;
}

export interface MessagePlan {
  /** Every send, in order (duplicates included). */
  readonly sends: readonly PlannedMessage[];
  /** Each distinct id and what it is. */
  readonly kinds: ReadonlyMap<string, MessageKind>;
  /** Ids that must be applied exactly once. */
  readonly good: ReadonlySet<string>;
  /** Ids that must reach the DLQ, with the reason they must carry. */
  readonly poison: ReadonlyMap<string, 'permanent-error' | 'schema-invalid'>;
  readonly duplicateSends: number;
}

export interface PlanOptions {
  readonly messages: number;
  readonly duplicateShare: number;
  readonly poisonShare: number;
  readonly transientShare: number;
  /** Prefix of every id (unique per run). */
  readonly prefix: string;
}

export function planMessages(random: Random, options: PlanOptions): MessagePlan {
  const total = Math.max(1, options.messages);
  const duplicateSends = Math.round(total * options.duplicateShare);
  const distinct = total - duplicateSends;
  const poisonCount = Math.max(1, Math.round(total * options.poisonShare));
  const kinds = new Map<string, MessageKind>();
  const originals: PlannedMessage[] = [];
  // Poison ids at random places in the stream.
  const poisonAt = new Set<number>();
  while (poisonAt.size < Math.min(poisonCount, distinct)) poisonAt.add(random.int(0, distinct - 1));
  let poisonSeen = 0;
  for (let n = 0; n < distinct; n++) {
    const id = `${options.prefix}-${n}`;
    let kind: MessageKind = 'ok';
    if (poisonAt.has(n)) kind = poisonSeen++ % 2 === 0 ? 'permanent' : 'schema-invalid';
    else if (random.chance(options.transientShare)) kind = 'transient';
    kinds.set(id, kind);
    const payload =
      kind === 'schema-invalid'
        ? { n, amount: 'not-a-number', mode: 'ok' }
        : {
            n,
            amount: n % 997,
            mode: kind === 'permanent' ? 'permanent' : kind === 'transient' ? 'transient' : 'ok',
          };
    originals.push({ id, kind, body: JSON.stringify(payload), key: `k${n % 64}` });
  }
  // Place each send on a line: originals at n, an adjacent copy just after its original, a later copy
  // somewhere after it (up to the end of the stream).
  const placed: { at: number; message: PlannedMessage }[] = originals.map((message, n) => ({
    at: n,
    message,
  }));
  for (let d = 0; d < duplicateSends; d++) {
    const n = random.int(0, distinct - 1);
    const at = random.chance(0.5) ? n + 0.5 + random.next() * 0.01 : n + 1 + random.next() * (distinct - n);
    placed.push({ at, message: originals[n]! });
  }
  placed.sort((a, b) => a.at - b.at);
  const good = new Set<string>();
  const poison = new Map<string, 'permanent-error' | 'schema-invalid'>();
  for (const [id, kind] of kinds) {
    if (kind === 'permanent') poison.set(id, 'permanent-error');
    else if (kind === 'schema-invalid') poison.set(id, 'schema-invalid');
    else good.add(id);
  }
  return { sends: placed.map((p) => p.message), kinds, good, poison, duplicateSends };
}
