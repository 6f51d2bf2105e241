// @inboxkit/data/pg: the inbox over node-postgres; handlers get the `pg.PoolClient` of the inbox's transaction.

export { pgInboxStore, pgSeam, type PgInboxStoreOptions } from './pg-seam.js';
export type { PgClientSeamOptions } from '../pg-client-seam.js';
