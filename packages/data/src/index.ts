// @inboxkit/data: what the data-layer adapters share. Each adapter is its own entry point, which loads only its
// library: @inboxkit/data/pg, /knex, /drizzle, /postgres-js, /typeorm, /prisma.

export { librarySeam, type LibraryDriver, type LibrarySession } from './library-seam.js';
export { pgClientSeam, type PgClientSeamOptions, type PgPool } from './pg-client-seam.js';
export { abortedTransactionError, findSqlState, postgresError } from './postgres-error.js';
