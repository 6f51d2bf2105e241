// `inboxkit console`: opens the inbox database, starts the console's web server, prints where it listens and
// serves until Ctrl-C (then lets running replays finish the message in hand). The credential is read from the
// environment or a file, never from the command line, and never printed.

import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';

import { ConfigurationError } from '@inboxkit/core';

import type { ConsoleCommand } from '../command-line.js';
import { startConsoleServer } from '../console/console-server.js';
import { openFastPathEntries } from '../inbox/fast-path-entries.js';
import { loadConsumerModule } from '../settings/load-schemas.js';
import type { CommandContext } from './command-context.js';
import { EXIT } from './command-context.js';

/** Reads the console's credential: `--token-file`, else `INBOXKIT_CONSOLE_TOKEN`; trailing whitespace dropped. */
async function readCredential(command: ConsoleCommand, context: CommandContext): Promise<string | undefined> {
  if (command.tokenFile !== undefined) {
    const path = resolve(context.io.cwd ?? process.cwd(), command.tokenFile);
    let content: string;
    try {
      content = await readFile(path, 'utf8');
    } catch (error) {
      throw new ConfigurationError(`cannot read --token-file ${path}: ${(error as Error).message}`, {
        cause: error,
      });
    }
    const token = content.trim();
    if (token === '') throw new ConfigurationError(`--token-file ${path} is empty`);
    return token;
  }
  const token = context.io.env.INBOXKIT_CONSOLE_TOKEN?.trim();
  return token === undefined || token === '' ? undefined : token;
}

/** Runs `console` until the run's signal aborts; returns the exit code. */
export async function runConsole(command: ConsoleCommand, context: CommandContext): Promise<number> {
  const { io, services, clock } = context;
  const credential = await readCredential(command, context);
  const fastPath = command.fastPath === undefined ? undefined : await openFastPathEntries(command.fastPath);
  let database: Awaited<ReturnType<typeof services.openDatabase>>;
  try {
    database = await services.openDatabase(command.connection);
  } catch (error) {
    await fastPath?.close();
    throw error;
  }
  try {
    const module =
      command.schemasModule === undefined
        ? undefined
        : await loadConsumerModule(command.schemasModule, io.cwd ?? process.cwd());
    const server = await startConsoleServer({
      schemas: module?.schemas,
      fingerprints: module?.fingerprints,
      host: command.host,
      port: command.port,
      allowRemote: command.allowRemote,
      credential,
      dlqs: command.dlqs,
      services,
      connection: command.connection,
      db: database.db,
      fastPath,
      operator: command.requestedBy,
      sampleIntervalMs: command.sampleIntervalMs,
      clock,
      log: (line) => io.stderr.write(`${new Date(clock.now()).toISOString()} ${line}\n`),
    });
    io.stdout.write(`inboxkit console: ${server.url}\n`);
    if (command.dlqs.length === 0) {
      io.stderr.write(
        'note: no --dlq given: the page shows the inbox only (pass --dlq rabbitmq:orders.dlq …)\n',
      );
    }
    await new Promise<void>((done) => {
      if (io.signal === undefined) return; // runs until the process ends
      if (io.signal.aborted) done();
      io.signal.addEventListener('abort', () => done(), { once: true });
    });
    await server.close();
    return EXIT.ok;
  } finally {
    await fastPath?.close();
    await database.close().catch(() => undefined);
  }
}
