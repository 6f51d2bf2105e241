// @inboxkit/data/prisma: the inbox over Prisma; handlers get the interactive transaction's client.

export {
  prismaInboxStore,
  prismaSeam,
  type PrismaClientLike,
  type PrismaInboxStoreOptions,
  type PrismaSeamOptions,
  type PrismaTransaction,
  type PrismaTransactionOptions,
} from './prisma-seam.js';
