// `npm run demo [-- --transport learning|kafka|rabbitmq|sqs|nats]`: runs the payments story and prints the report.
// Exit code 0 when every payment was charged exactly once, 1 on a violation or when a service is missing,
// 2 on a usage error.

import { parseArgs } from 'node:util';

import { TRANSPORT_NAMES } from './demo-transport.js';
import type { TransportName } from './demo-transport.js';
import { runDemo } from './run-demo.js';
import { serviceSettingsFromEnv, ServiceUnavailableError } from './service-settings.js';
import { colourWanted, painter } from './table.js';

const USAGE = `usage: npm run demo [-- --transport learning|kafka|rabbitmq|sqs|nats]

  learning  (default) no server: PGlite as the embedded Postgres, the learning transport in memory
  kafka     real Postgres and Kafka
  rabbitmq  real Postgres and RabbitMQ
  sqs       real Postgres and SQS (ElasticMQ locally)
  nats      real Postgres and NATS JetStream

Real services are found as \`npm test\` finds them: DATABASE_URL, KAFKA_BROKERS, AMQP_URL, SQS_ENDPOINT (and
SQS_REGION), else the project's running services (.services/env, from \`npm run services:up\`), else the
project's own services are started for this run (scripts/services/services.sh) and stopped after it.
`;

/** The discovery name of each real transport's broker. */
const BROKER = { kafka: 'kafka', rabbitmq: 'rabbitmq', sqs: 'sqs', nats: 'nats' } as const;

async function main(argv: readonly string[]): Promise<number> {
  let transport: TransportName = 'learning';
  try {
    const { values } = parseArgs({
      args: [...argv],
      options: { transport: { type: 'string', short: 't' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
    });
    if (values.help === true) {
      process.stdout.write(USAGE);
      return 0;
    }
    if (values.transport !== undefined) {
      if (!(TRANSPORT_NAMES as readonly string[]).includes(values.transport))
        throw new Error(`unknown transport ${JSON.stringify(values.transport)}`);
      transport = values.transport as TransportName;
    }
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  // The AWS SDK warns on Node 20 about its releases of 2027, nine lines in the middle of the report.
  process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';
  const colour = colourWanted(process.stdout);
  const p = painter(colour);
  // A real transport: Postgres and its broker, found (or started for this run) the way `npm test` does.
  let stopServices = async (): Promise<void> => {};
  if (transport !== 'learning') {
    // Loaded only here: the learning demo needs no discovery (nor the testcontainers client it may load).
    const { findServices, ServicesNotStartedError } = await import('../../../test/support/find-services.js');
    try {
      const found = await findServices({
        names: ['postgres', BROKER[transport]],
        log: (message) => process.stderr.write(`[services] ${message}\n`),
        again: `npm run demo -- --transport ${transport}`,
      });
      Object.assign(process.env, found.env);
      stopServices = found.stop;
    } catch (error) {
      if (!(error instanceof ServicesNotStartedError)) throw error;
      process.stderr.write(`${p.paint('✗ cannot run the demo', 'red')}\n${error.message}\n`);
      return 1;
    }
  }
  try {
    const result = await runDemo({
      transport,
      services: serviceSettingsFromEnv(),
      colour,
      out: (line) => process.stdout.write(`${line}\n`),
    });
    return result.ok ? 0 : 1;
  } catch (error) {
    if (error instanceof ServiceUnavailableError) {
      process.stderr.write(`${p.paint('✗ cannot run the demo', 'red')}\n${error.message}\n`);
      return 1;
    }
    process.stderr.write(
      `${p.paint('✗ the demo failed', 'red')}\n${(error as Error).stack ?? String(error)}\n`,
    );
    return 1;
  } finally {
    await stopServices();
  }
}

process.exitCode = await main(process.argv.slice(2));
