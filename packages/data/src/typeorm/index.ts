// @inboxkit/data/typeorm: the inbox over TypeORM; handlers get the `EntityManager` of the inbox's transaction.

export {
  typeormInboxStore,
  typeormSeam,
  type TypeormInboxStoreOptions,
  type TypeormSeamOptions,
} from './typeorm-seam.js';
