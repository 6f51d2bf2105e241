// Runs a command with the services it needs, found as `npm test` finds them (the environment → testcontainers
// → the project's own running services → the project's own services started for this command), their settings
// passed in the environment (DATABASE_URL, KAFKA_BROKERS, AMQP_URL, SQS_ENDPOINT, ...). What it started is
// stopped when the command ends. The examples' `npm run start` goes through it:
//
//   node --import tsx scripts/services/with-services.ts postgres rabbitmq -- node src/main.ts
//
// Service names: postgres, kafka, rabbitmq, sqs. Exit code: the command's, or 1 when a service is unavailable.
import { spawn } from 'node:child_process';
import { SERVICE_NAMES, type ServiceName } from '../../test/support/discovery.js';
import { ServicesNotStartedError, findServices } from '../../test/support/find-services.js';

const log = (message: string) => console.error(`[services] ${message}`);

const args = process.argv.slice(2);
const separator = args.indexOf('--');
const names = separator < 0 ? [] : args.slice(0, separator);
const command = separator < 0 ? [] : args.slice(separator + 1);
const unknown = names.filter((name) => !(SERVICE_NAMES as readonly string[]).includes(name));
if (command.length === 0 || names.length === 0 || unknown.length > 0) {
  console.error(
    'usage: with-services.ts SERVICE... -- COMMAND [ARG...]   ' +
      `(SERVICE: ${SERVICE_NAMES.join(', ')})${unknown.length > 0 ? `; unknown: ${unknown.join(', ')}` : ''}`,
  );
  process.exit(2);
}

// The command the user typed, for the message that asks to run it again.
const again = process.env['npm_lifecycle_event']
  ? `npm run ${process.env['npm_lifecycle_event']}${process.env['npm_package_name'] ? ` -w ${process.env['npm_package_name']}` : ''}`
  : command.join(' ');

let found: Awaited<ReturnType<typeof findServices>>;
try {
  found = await findServices({ names: names as ServiceName[], log, again });
} catch (error) {
  if (!(error instanceof ServicesNotStartedError)) throw error;
  console.error(`[services] ${error.message}`);
  process.exit(1);
}

const [file, ...rest] = command as [string, ...string[]];
const child = spawn(file, rest, { stdio: 'inherit', env: { ...process.env, ...found.env } });
// Ctrl-C reaches the command too (same process group); a SIGTERM sent to this process is passed on. Either way
// this process waits for the command to end, then stops what it started.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    if (signal !== 'SIGINT') child.kill(signal);
  });
}
const code = await new Promise<number>((resolvePromise) => {
  child.once('error', (error) => {
    console.error(`[services] could not run ${file}: ${error.message}`);
    resolvePromise(127);
  });
  child.once('exit', (exitCode, signal) =>
    resolvePromise(exitCode ?? (signal ? 128 + signalNumber(signal) : 1)),
  );
});
await found.stop();
process.exit(code);

function signalNumber(signal: NodeJS.Signals): number {
  return { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 }[signal as string] ?? 1;
}
