// The stream the demo sends: ten payments from a checkout page, with the troubles a real payments consumer
// meets. Each payment says what should happen to it, so the final check compares facts with expectations
// instead of printing a fixed line.

import { DECLINED_CARD } from './payment-provider.js';

/** What goes wrong with a payment on its way. */
export type Trouble =
  | 'double-click'
  | 'crash-after-commit'
  | 'crash-before-commit'
  | 'provider-503'
  | 'old-app-format'
  | 'card-declined';

/** One payment of the story. */
export interface StoryPayment {
  /** The payment id, created by the checkout page; also the message id of every copy of it. */
  readonly paymentId: string;
  /** The ordering key: a customer's payments are delivered in order. */
  readonly customer: string;
  /** The message body exactly as the producer sends it. */
  readonly body: Readonly<Record<string, unknown>>;
  readonly troubles: readonly Trouble[];
  /** Whether the payment must end up charged (exactly once) after the fix and the replay. */
  readonly chargedInTheEnd: boolean;
  /** What a reader should notice about it, for the final table. */
  readonly note: string;
}

function payment(
  n: number,
  customer: string,
  amountCents: number,
  troubles: readonly Trouble[] = [],
  note = '',
  overrides: Record<string, unknown> = {},
): StoryPayment {
  const paymentId = `pay-${String(n).padStart(3, '0')}`;
  const body: Record<string, unknown> = {
    paymentId,
    customer,
    amountCents,
    currency: 'EUR',
    card: 'tok_visa',
    ...overrides,
  };
  for (const [key, value] of Object.entries(overrides)) if (value === undefined) delete body[key];
  return { paymentId, customer, body, troubles, chargedInTheEnd: !troubles.includes('card-declined'), note };
}

/** The ten payments, in the order the checkout page sends them. */
export const STORY: readonly StoryPayment[] = [
  payment(1, 'c-ada', 1_250),
  payment(2, 'c-bob', 4_990, ['double-click'], 'double click: second copy suppressed'),
  payment(3, 'c-cyd', 2_000, ['crash-after-commit'], 'ack lost after the charge: redelivery suppressed'),
  payment(4, 'c-ada', 799, ['provider-503'], 'provider 503, retried with the same key'),
  payment(5, 'c-dan', 15_000, ['double-click'], 'double click: second copy suppressed'),
  payment(6, 'c-bob', 3_300, ['crash-before-commit'], 'crash before COMMIT: provider saw the key again'),
  payment(7, 'c-eve', 640),
  payment(
    8,
    'c-cyd',
    1_999,
    ['old-app-format', 'double-click'],
    'old app format: fixed, replayed, charged once',
    {
      amountCents: undefined,
      amount: '19.99',
    },
  ),
  payment(9, 'c-dan', 12_000, ['card-declined'], 'declined: never charged, left in the DLQ', {
    card: DECLINED_CARD,
  }),
  payment(10, 'c-eve', 2_500),
];

/** One message as the producer publishes it. */
export interface StoryMessage {
  readonly id: string;
  readonly key: string;
  readonly body: string;
  /** The n-th publish of the run (1-based): tells a redelivery of one copy from a second copy. */
  readonly copy: number;
}

/** Header that carries `StoryMessage.copy` through every broker. */
export const COPY_HEADER = 'x-demo-copy';

/** The messages to publish: every payment once, and a second copy right after each double click. */
export function storyMessages(story: readonly StoryPayment[] = STORY): StoryMessage[] {
  const messages: StoryMessage[] = [];
  for (const p of story) {
    const copies = p.troubles.includes('double-click') ? 2 : 1;
    for (let i = 0; i < copies; i++) {
      messages.push({
        id: p.paymentId,
        key: p.customer,
        body: JSON.stringify(p.body),
        copy: messages.length + 1,
      });
    }
  }
  return messages;
}

/** The payments that have `trouble`. */
export function withTrouble(trouble: Trouble, story: readonly StoryPayment[] = STORY): string[] {
  return story.filter((p) => p.troubles.includes(trouble)).map((p) => p.paymentId);
}
