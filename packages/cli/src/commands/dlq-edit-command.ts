// `inboxkit dlq edit`: edit and retry one dead letter (see replay/edit-and-retry.ts) — read the corrected
// payload, check it against the consumer's schema, amend the inbox row (audited) and replay it once.

import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';

import { ConfigurationError } from '@inboxkit/core';

import type { DlqEditCommand } from '../command-line.js';
import { inboxStore } from '../inbox/inbox-store.js';
import { postgresInboxLookup } from '../inbox/postgres-inbox-lookup.js';
import { displayName, displayText } from '../output/display-text.js';
import { writeJson } from '../output/write-json.js';
import { editAndRetry } from '../replay/edit-and-retry.js';
import { loadConsumerModule } from '../settings/load-schemas.js';
import type { CommandContext } from './command-context.js';
import { EXIT } from './command-context.js';

async function readPayload(file: string, cwd: string): Promise<string> {
  if (file === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }
  const path = resolve(cwd, file);
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw new ConfigurationError(`cannot read --payload-file ${path}: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/** Runs `dlq edit`; returns the exit code (1 when the edit was refused or the copy not replayed). */
export async function runDlqEdit(command: DlqEditCommand, context: CommandContext): Promise<number> {
  const { io, services, clock } = context;
  const cwd = io.cwd ?? process.cwd();
  const payload = await readPayload(command.payloadFile, cwd);
  const module =
    command.schemasModule === undefined ? undefined : await loadConsumerModule(command.schemasModule, cwd);
  const schemas = module?.schemas;
  const schema = schemas?.[command.consumer];
  if (schemas !== undefined && schema === undefined) {
    throw new ConfigurationError(
      `--schemas ${command.schemasModule} has no schema for consumer ${command.consumer}`,
    );
  }
  if (schema === undefined)
    io.stderr.write('note: no --schemas: the edited payload is checked as JSON only\n');
  const database = await services.openDatabase(command.connection);
  try {
    const store = inboxStore(database.db, command.connection);
    const result = await editAndRetry(
      {
        transport: command.transport,
        from: command.from,
        group: command.group,
        to: command.to,
        consumer: command.consumer,
        messageId: command.messageId,
        payload,
        reason: command.reason,
        requestedBy: command.requestedBy,
        replayId: randomUUID(),
        schema,
        fingerprint: module?.fingerprints[command.consumer],
      },
      {
        services,
        connection: command.connection,
        store,
        inbox: postgresInboxLookup(database.db, store),
        clock,
      },
    );
    if (command.json) writeJson(io.stdout, result);
    else if (result.kind === 'refused') io.stdout.write(`Refused: ${displayText(result.why)}\n`);
    else {
      const what = `${displayName(command.messageId)} (consumer ${displayName(command.consumer)})`;
      const audit = result.amended
        ? `amended ${result.fromFingerprint ?? 'none'} -> ${result.toFingerprint} by ${displayName(command.requestedBy)}, audited under replay ${result.replayId}`
        : `the row already held ${result.toFingerprint} (an earlier, audited edit)`;
      io.stdout.write(
        result.kind === 'replayed'
          ? `Edited and replayed ${what}: ${audit}; published to ${displayName(result.entry.destination ?? '?')} and removed from the DLQ.\n`
          : `Not replayed ${what}: ${displayText(result.entry.detail ?? 'failed')}. ${result.amended ? `The row was ${audit}; run the same edit again.` : ''}\n`,
      );
    }
    return result.kind === 'replayed' ? EXIT.ok : EXIT.failed;
  } finally {
    await database.close().catch(() => undefined);
  }
}
