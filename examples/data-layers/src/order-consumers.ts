// One orders consumer per data layer: the same handler (insert the order) written with each library, through
// the transaction object the inbox hands it as `context.tx`. Each is built by `openOrders(adapter, target)`.

import { idempotentConsumer, type IdempotentConsumer, type InboxStore } from '@inboxkit/core';
import { drizzleInboxStore } from '@inboxkit/data/drizzle';
import { knexInboxStore } from '@inboxkit/data/knex';
import { pgInboxStore } from '@inboxkit/data/pg';
import { postgresJsInboxStore } from '@inboxkit/data/postgres-js';
import { prismaInboxStore } from '@inboxkit/data/prisma';
import { typeormInboxStore } from '@inboxkit/data/typeorm';
import { PrismaPg } from '@prisma/adapter-pg';
import { drizzle } from 'drizzle-orm/node-postgres';
import { integer, pgSchema, text } from 'drizzle-orm/pg-core';
import Knex from 'knex';
import pg from 'pg';
import postgres from 'postgres';
import { DataSource, EntitySchema } from 'typeorm';
import { PrismaClient } from '../prisma/generated/client.js';

/** An order as it arrives. */
export interface Order {
  readonly id: string;
  readonly totalCents: number;
}

/** Where the example writes: a connection string and the schema holding the inbox and `orders`. */
export interface Target {
  readonly url: string;
  readonly schema: string;
}

export const ADAPTERS = ['pg', 'knex', 'drizzle', 'postgres-js', 'typeorm', 'prisma'] as const;
export type Adapter = (typeof ADAPTERS)[number];

/** A consumer of orders over one data layer, and how to close its pool. */
export interface OrdersConsumer {
  readonly consumer: IdempotentConsumer<Order, object>;
  close(): Promise<void>;
}

function consumerOf<Tx extends object>(
  store: InboxStore<Tx>,
  insert: (tx: Tx, order: Order) => Promise<unknown>,
): IdempotentConsumer<Order, object> {
  return idempotentConsumer<Order, Tx>({
    name: 'orders',
    store,
    handler: async (message, { tx }) => {
      await insert(tx, message.payload);
    },
  }) as unknown as IdempotentConsumer<Order, object>;
}

/** The orders consumer over `adapter`. */
export async function openOrders(adapter: Adapter, { url, schema }: Target): Promise<OrdersConsumer> {
  switch (adapter) {
    case 'pg': {
      const pool = new pg.Pool({ connectionString: url });
      const consumer = consumerOf(pgInboxStore({ pool, schema }), (tx, o) =>
        tx.query(`INSERT INTO "${schema}".orders (id, total_cents) VALUES ($1, $2)`, [o.id, o.totalCents]),
      );
      return { consumer, close: () => pool.end() };
    }
    case 'knex': {
      const knex = Knex({ client: 'pg', connection: url });
      const consumer = consumerOf(knexInboxStore({ knex, schema }), (tx, o) =>
        tx.withSchema(schema).insert({ id: o.id, total_cents: o.totalCents }).into('orders'),
      );
      return { consumer, close: () => knex.destroy() };
    }
    case 'drizzle': {
      const orders = pgSchema(schema).table('orders', {
        id: text('id').primaryKey(),
        totalCents: integer('total_cents').notNull(),
      });
      const pool = new pg.Pool({ connectionString: url });
      const db = drizzle({ client: pool, schema: { orders } });
      const consumer = consumerOf(drizzleInboxStore({ db, schema }), (tx, o) => tx.insert(orders).values(o));
      return { consumer, close: () => pool.end() };
    }
    case 'postgres-js': {
      const sql = postgres(url, { onnotice: () => {} });
      const consumer = consumerOf(
        postgresJsInboxStore({ sql, schema }),
        (tx, o) => tx`INSERT INTO ${tx(schema)}.orders (id, total_cents) VALUES (${o.id}, ${o.totalCents})`,
      );
      return { consumer, close: () => sql.end() };
    }
    case 'typeorm': {
      const OrderEntity = new EntitySchema<Order>({
        name: 'Order',
        tableName: 'orders',
        schema,
        columns: { id: { type: 'text', primary: true }, totalCents: { type: 'int', name: 'total_cents' } },
      });
      const dataSource = await new DataSource({
        type: 'postgres',
        url,
        entities: [OrderEntity],
      }).initialize();
      const consumer = consumerOf(typeormInboxStore({ dataSource, schema }), (tx, o) =>
        tx.insert(OrderEntity, o),
      );
      return { consumer, close: () => dataSource.destroy() };
    }
    case 'prisma': {
      const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }, { schema }) });
      const consumer = consumerOf(prismaInboxStore({ prisma, schema }), (tx, o) =>
        tx.order.create({ data: o }),
      );
      return { consumer, close: () => prisma.$disconnect() };
    }
  }
}
