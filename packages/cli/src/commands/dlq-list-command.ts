// `inboxkit dlq list`: what sits in a DLQ, grouped, with the inbox status of each id.

import type { DlqListCommand } from '../command-line.js';
import type { OpenedDatabase, OpenedTransport } from '../cli-services.js';
import { openInboxStore } from '../inbox/inbox-store.js';
import { postgresInboxLookup } from '../inbox/postgres-inbox-lookup.js';
import { formatTable, truncate } from '../output/format-table.js';
import { writeJson } from '../output/write-json.js';
import { listDeadLetters } from '../replay/list-dead-letters.js';
import type { DeadLetterListing } from '../replay/list-dead-letters.js';
import { loadConsumerModule } from '../settings/load-schemas.js';
import { maskConnectionString } from '../settings/mask-connection-string.js';
import type { CommandContext } from './command-context.js';
import { EXIT } from './command-context.js';
import { displayName, displayText } from '../output/display-text.js';

/** Runs `dlq list`; returns the exit code. */
export async function runDlqList(command: DlqListCommand, context: CommandContext): Promise<number> {
  const { io, services } = context;
  let database: OpenedDatabase | undefined;
  let transport: OpenedTransport | undefined;
  // Loaded (and checked) before anything is opened: a bad module is exit 3 with nothing touched.
  const fingerprints =
    command.schemasModule === undefined
      ? undefined
      : (await loadConsumerModule(command.schemasModule, io.cwd ?? process.cwd())).fingerprints;
  try {
    if (command.connection.databaseUrl !== undefined)
      database = await services.openDatabase(command.connection);
    transport = await services.openTransport(command.transport, command.connection, {
      from: command.from,
      group: command.group,
      publish: false,
    });
    const listing = await listDeadLetters({
      reader: transport.reader,
      inbox:
        database === undefined
          ? undefined
          : postgresInboxLookup(database.db, await openInboxStore(database.db, command.connection)),
      filter: command.filter,
      limit: command.limit,
      fingerprints,
    });
    if (command.json)
      writeJson(io.stdout, {
        transport: command.transport,
        from: maskConnectionString(command.from),
        ...listing,
      });
    else io.stdout.write(renderListing(command, listing, database !== undefined));
    return EXIT.ok;
  } finally {
    await transport?.close().catch(() => undefined);
    await database?.close().catch(() => undefined);
  }
}

function statuses(counts: Readonly<Record<string, number | undefined>>): string {
  return Object.entries(counts)
    .filter(([, n]) => n !== undefined && n > 0)
    .map(([s, n]) => `${s} ${n}`)
    .join(', ');
}

/** The human-readable listing. */
export function renderListing(
  command: DlqListCommand,
  listing: DeadLetterListing,
  inboxRead: boolean,
): string {
  const lines: string[] = [];
  lines.push(
    `${command.transport} DLQ ${displayName(maskConnectionString(command.from))}: ${listing.entries.length} dead letters shown of ${listing.read} read${listing.truncated ? ` (stopped at --limit ${command.limit}; there may be more)` : ''}`,
  );
  lines.push(
    listing.nonDestructiveBrowse
      ? 'Read without consuming: the DLQ is unchanged.'
      : `Note: ${command.transport} cannot peek. Listing received each message and released it: receive counts went up and the order may have changed; nothing was removed.`,
  );
  if (!inboxRead) lines.push('Inbox status not read (no --database-url / DATABASE_URL).');
  lines.push('');
  if (listing.groups.length === 0) {
    lines.push('Nothing to show.');
    return `${lines.join('\n')}\n`;
  }
  lines.push(
    formatTable(
      ['count', 'consumer', 'reason', 'error', 'inbox status', 'newest', 'ids'],
      listing.groups.map((g) => [
        g.count,
        g.consumer === undefined ? '?' : displayName(g.consumer),
        g.reason === undefined ? '(not inboxkit)' : displayName(g.reason),
        truncate(displayText(g.sampleError ?? '-'), 60),
        statuses(g.inboxStatuses),
        g.newest?.toISOString() ?? '-',
        truncate(g.sampleIds.map(displayName).join(' '), 40),
      ]),
    ),
  );
  const parked = listing.entries.filter((e) => e.parked);
  if (parked.length > 0) {
    lines.push(
      `Parked: ${parked.length} (a replay of each failed before; \`dlq replay\` leaves them in the DLQ unless --include-parked): ${parked
        .slice(0, 10)
        .map((e) => (e.id === undefined ? '(no id)' : displayName(e.id)))
        .join(' ')}${parked.length > 10 ? ' …' : ''}`,
    );
  }
  return `${lines.join('\n')}\n`;
}
