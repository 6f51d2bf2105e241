// @inboxkit/data/postgres-js: the inbox over postgres.js; handlers get the `TransactionSql` of `sql.begin()`.

export {
  postgresJsInboxStore,
  postgresJsSeam,
  type PostgresJsInboxStoreOptions,
} from './postgres-js-seam.js';
