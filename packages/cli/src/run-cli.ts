// `runCli(argv, io)`: the whole `inboxkit` command as a function: parse, run, print, return the exit code.
// The bin calls it with the process's streams; tests call it in-process.

import { isInboxkitError } from '@inboxkit/core';

import type { CliIo } from './cli-io.js';
import type { CliServices } from './cli-services.js';
import { parseCommandLine } from './command-line.js';
import type { ParsedCommand } from './command-line.js';
import { EXIT } from './commands/command-context.js';
import type { CommandContext } from './commands/command-context.js';
import { runConsole } from './commands/console-command.js';
import { runDlqList } from './commands/dlq-list-command.js';
import { runDlqEdit } from './commands/dlq-edit-command.js';
import { runDlqReplay } from './commands/dlq-replay-command.js';
import { runForget } from './commands/forget-command.js';
import { runRetire } from './commands/retire-command.js';
import { runDoctor } from './commands/doctor-command.js';
import { runMigrate } from './commands/migrate-command.js';
import { runPartitions } from './commands/partitions-command.js';
import { runPrune } from './commands/prune-command.js';
import { runStatus } from './commands/status-command.js';
import { systemClock } from './replay/clock.js';
import { secretScrubber } from './settings/secret-scrubber.js';
import { defaultCliServices } from './transports/default-cli-services.js';
import { usage } from './usage.js';
import { UsageError } from './usage-error.js';
import { displayText } from './output/display-text.js';

/** The version printed by `inboxkit --version`. */
export const CLI_VERSION = '0.1.0';

/** Options of `runCli` beyond the process surroundings. */
export interface RunCliOptions {
  /** Connections to use instead of the real ones built from flags and environment. */
  readonly services?: CliServices | undefined;
}

async function dispatch(
  command: Exclude<ParsedCommand, { command: 'help' | 'version' }>,
  context: CommandContext,
): Promise<number> {
  switch (command.command) {
    case 'migrate':
      return runMigrate(command, context);
    case 'status':
      return runStatus(command, context);
    case 'prune':
      return runPrune(command, context);
    case 'partitions':
      return runPartitions(command, context);
    case 'dlq list':
      return runDlqList(command, context);
    case 'dlq replay':
      return runDlqReplay(command, context);
    case 'dlq edit':
      return runDlqEdit(command, context);
    case 'forget':
      return runForget(command, context);
    case 'discard':
    case 'archive':
      return runRetire(command, context);
    case 'doctor':
      return runDoctor(command, context);
    case 'console':
      return runConsole(command, context);
  }
}

/**
 * Runs one `inboxkit` command line and resolves to its exit code: 0 ok, 1 the command ran but something
 * failed, 2 usage error (printed with the usage), 3 could not run (connection or configuration), 130
 * interrupted. Never throws for the command's own failures; output goes to `io.stdout` / `io.stderr`, through
 * a `SecretScrubber` that knows every connection string of `argv` and the environment, so no password reaches
 * the output whatever prints it.
 *
 * @example
 * const code = await runCli(['dlq', 'replay', '--transport', 'sqs', '--from', 'orders-dlq', '--dry-run'], {
 *   stdout: process.stdout, stderr: process.stderr, env: process.env,
 * });
 */
export async function runCli(
  argv: readonly string[],
  processIo: CliIo,
  options: RunCliOptions = {},
): Promise<number> {
  const scrubber = secretScrubber(argv, processIo.env);
  const io: CliIo = {
    ...processIo,
    stdout: scrubber.wrap(processIo.stdout),
    stderr: scrubber.wrap(processIo.stderr),
  };
  const clock = io.clock ?? systemClock;
  let parsed: ParsedCommand;
  try {
    parsed = parseCommandLine(argv, io.env, clock.now());
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr.write(
        `inboxkit: ${displayText(error.message)}\n\n${usage(error.command as Parameters<typeof usage>[0], true)}`,
      );
      return EXIT.usage;
    }
    throw error;
  }
  if (parsed.command === 'help') {
    io.stdout.write(usage(parsed.topic));
    return EXIT.ok;
  }
  if (parsed.command === 'version') {
    io.stdout.write(`inboxkit ${CLI_VERSION}\n`);
    return EXIT.ok;
  }
  const consumer =
    'consumer' in parsed ? parsed.consumer : 'filter' in parsed ? parsed.filter.consumer : undefined;
  const services = options.services ?? defaultCliServices(io.env, consumer);
  try {
    return await dispatch(parsed, { io, services, clock });
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr.write(
        `inboxkit: ${displayText(error.message)}\n\n${usage(error.command as Parameters<typeof usage>[0], true)}`,
      );
      return EXIT.usage;
    }
    // Messages may quote ids, names or database values: printed escaped, their line breaks kept.
    const text = (e: unknown): string =>
      displayText(e instanceof Error ? e.message : String(e), { multiline: true });
    io.stderr.write(`inboxkit ${parsed.command}: ${text(error)}\n`);
    const cause = error instanceof Error ? error.cause : undefined;
    if (cause !== undefined) io.stderr.write(`  caused by: ${text(cause)}\n`);
    return isInboxkitError(error) && error.code === 'CONFIGURATION'
      ? EXIT.cannotRun
      : connectionFailure(error)
        ? EXIT.cannotRun
        : EXIT.failed;
  }
}

/** True for errors of reaching a service (refused, DNS, timeout, auth). */
function connectionFailure(error: unknown): boolean {
  for (
    let e: unknown = error, depth = 0;
    e !== undefined && e !== null && depth < 5;
    e = (e as { cause?: unknown }).cause, depth += 1
  ) {
    const code = (e as { code?: unknown }).code;
    if (
      typeof code === 'string' &&
      /^(ECONNREFUSED|ENOTFOUND|ETIMEDOUT|ECONNRESET|EAI_AGAIN|28P01|3D000|28000)$/.test(code)
    )
      return true;
    const name = (e as { name?: unknown }).name;
    if (
      typeof name === 'string' &&
      /KafkaJSConnectionError|KafkaJSNumberOfRetriesExceeded|CredentialsProviderError/.test(name)
    )
      return true;
  }
  return false;
}
