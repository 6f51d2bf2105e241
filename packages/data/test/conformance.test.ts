// The store conformance suite over every data-layer adapter on real Postgres: the handler writes its effect the
// library's own way through the transaction object it is given (fixtures/adapters.ts).

import { afterAll, beforeAll } from 'vitest';
import { describeInboxStoreConformance } from '../../testing/src/store-conformance.js';
import { ADAPTERS, openAdapter, type AdapterName } from './fixtures/adapters.js';
import { countEffects, openTestDatabase, type TestDatabase } from './support.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await openTestDatabase('conformance');
});
afterAll(async () => {
  await t?.close();
});

for (const name of Object.keys(ADAPTERS) as AdapterName[]) {
  describeInboxStoreConformance<object>(name, async () => {
    const adapter = await openAdapter(name, t);
    return {
      store: adapter.store,
      applyEffect: (tx, consumer, messageId) => adapter.applyEffect(tx, consumer, messageId),
      countEffects: (consumer, messageId) => countEffects(t.pool, t.schema, consumer, messageId),
      sendStatement: (tx, sql) => adapter.sendStatement(tx, sql),
      close: () => adapter.close(),
    };
  });
}
