// One vitest run for the whole monorepo: each package is a project, all share the service discovery in
// test/support/global-setup.ts. Packages are resolved to their TypeScript sources through the
// `@inboxkit/source` export condition, so no build is needed before testing.
import { defineConfig } from 'vitest/config';

// No 'import'/'module' here: vitest hands these conditions to Node for externalised CommonJS packages too, and
// with 'import' a require('pg-pool') inside pg would load pg-pool's ESM build ("Class extends value [object Module]").
const sourceCondition = ['@inboxkit/source', 'node', 'default'];
const projects = ['core', 'testing', 'kafka', 'rabbitmq', 'sqs', 'nats', 'cli', 'outbox', 'http', 'data', 'client', 'nestjs'];
// Tests that restart a shared broker or database, or drop tables by the dozen (partition maintenance: Kysely's
// Migrator reads every schema's tables, and a table dropped during that read fails another file's migration).
// They run in their own project, after every other project has finished (groupOrder 1) and one file at a time,
// so a restart never pulls a server from under another package's test.
const chaos = [
  'packages/kafka/test/kafka-broker-restart.test.ts',
  'packages/rabbitmq/test/broker-restart.test.ts',
  'packages/nats/test/nats-broker-restart.test.ts',
  'packages/core/test/partitions/partition-maintenance.test.ts',
  'packages/core/test/partitions/partitioned-redelivery.test.ts',
  'packages/core/test/partitions/partitioned-migration-populated.test.ts',
  'packages/cli/test/partitions-command.test.ts',
];

export default defineConfig({
  resolve: { conditions: sourceCondition },
  ssr: { resolve: { conditions: sourceCondition, externalConditions: ['@inboxkit/source'] } },
  test: {
    globalSetup: ['./test/support/global-setup.ts'],
    // The default output, then one plain closing line `N passed, N failed[, N skipped]` that CI reads.
    reporters: ['default', './test/support/summary-reporter.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration tests share four real servers on a 2-core machine: bound the parallelism.
    maxWorkers: 2,
    projects: [
      ...projects.map((name) => ({
        extends: true as const,
        test: {
          name,
          include: [`packages/${name}/test/**/*.test.ts`],
          exclude: [...chaos, '**/node_modules/**'],
        },
      })),
      {
        extends: true as const,
        test: { name: 'chaos', include: chaos, sequence: { groupOrder: 1 }, fileParallelism: false },
      },
      { extends: true as const, test: { name: 'e2e', include: ['test/**/*.test.ts'] } },
      { extends: true as const, test: { name: 'examples', include: ['examples/*/test/**/*.test.ts'] } },
    ],
  },
});
