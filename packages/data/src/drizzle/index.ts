// @inboxkit/data/drizzle: the inbox over Drizzle (node-postgres or postgres.js); handlers get Drizzle's transaction.

export {
  drizzleInboxStore,
  drizzleSeam,
  type DrizzleInboxStoreOptions,
  type DrizzlePgDatabase,
  type DrizzleTransaction,
} from './drizzle-seam.js';
