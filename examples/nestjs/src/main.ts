// Runs the service against the Postgres and RabbitMQ of `npm run services:up` (or DATABASE_URL and AMQP_URL)
// until SIGTERM / Ctrl-C, which drains the messages in flight (PORT, default 3000). `npm run start -w @inboxkit/example-nestjs`

import pg from 'pg';
import { startService } from './orders-service.js';

function setting(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '') {
    console.error(`${name} is not set: start the services with \`npm run services:up\`, or set ${name}`);
    process.exit(1);
  }
  return value;
}

const schema = 'nestjs_example';
const pool = new pg.Pool({ connectionString: setting('DATABASE_URL'), options: `-c search_path=${schema}` });
pool.on('error', () => undefined);
await pool.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
const { url } = await startService({
  pool,
  schema,
  amqpUrl: setting('AMQP_URL'),
  queue: 'orders-nestjs-example',
  port: Number(process.env['PORT'] ?? 3000),
});
console.log(
  `payments on ${url}/payments (send Idempotency-Key and x-customer); consuming orders.placed from RabbitMQ`,
);
