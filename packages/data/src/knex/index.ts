// @inboxkit/data/knex: the inbox over Knex; handlers get the `Knex.Transaction` of the inbox's transaction.

export { knexInboxStore, knexSeam, type KnexInboxStoreOptions, type KnexSeamOptions } from './knex-seam.js';
