// The inbox's columns after its key are spelled once (src/postgres/inbox-columns.ts): the tables Postgres
// creates, in both layouts, have exactly those columns, and no other source file of core lists them again.
// Before, the hot-column list was written out four times (the DDL, the state machine's write of a row, the
// adoption of a legacy row into a partition and the retirement of the legacy tables) and the details list twice;
// the source check below named those files.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DETAIL_COLUMNS, HOT_COLUMNS } from '../src/postgres/inbox-columns.js';
import { openTestDatabase, type TestDatabase } from './support/postgres.js';

const SRC = fileURLToPath(new URL('../src', import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    return statSync(path).isDirectory() ? sourceFiles(path) : entry.endsWith('.ts') ? [path] : [];
  });
}

/**
 * The files (but inbox-columns.ts) with every one of `columns` named within a few consecutive lines. `rowJson`
 * (inbox-schema.ts) is left out: it maps each column to a field of `InboxRowState` with its own conversion, a
 * mapping and not a list of the columns.
 */
function filesListing(columns: readonly string[]): string[] {
  const window = columns.length + 2;
  const found: string[] = [];
  for (const file of sourceFiles(SRC)) {
    if (file.endsWith('inbox-columns.ts')) continue;
    const text = readFileSync(file, 'utf8').replace(/export function rowJson\([^]*?\n}\n/, '');
    const lines = text.split('\n');
    for (let at = 0; at < lines.length; at += 1) {
      const text = lines.slice(at, at + window).join('\n');
      if (columns.every((c) => new RegExp(`\\b${c}\\b`).test(text))) {
        found.push(`${relative(SRC, file)}:${at + 1}`);
        break;
      }
    }
  }
  return found;
}

describe('inbox columns', () => {
  it('are listed in one file of core: a column added there reaches the DDL, the writes and every copy of a row', () => {
    expect(filesListing(HOT_COLUMNS)).toEqual([]);
    expect(filesListing(DETAIL_COLUMNS)).toEqual([]);
  });

  describe('on Postgres', () => {
    const layouts = ['table', 'daily-partitions'] as const;
    const open = new Map<string, TestDatabase>();
    beforeAll(async () => {
      for (const layout of layouts) open.set(layout, await openTestDatabase(`columns_${layout.replace('-', '_')}`, 2, layout));
    });
    afterAll(async () => {
      for (const t of open.values()) await t.close();
    });

    for (const layout of layouts) {
      it(`are the columns of the ${layout} layout's tables, in order`, async () => {
        const t = open.get(layout)!;
        const columnsOf = async (table: string): Promise<string[]> =>
          (
            await sql<{ column_name: string }>`SELECT column_name FROM information_schema.columns
              WHERE table_schema = ${t.schema} AND table_name = ${table} ORDER BY ordinal_position`.execute(t.db)
          ).rows.map((r) => r.column_name);
        const key = layout === 'table' ? ['consumer', 'message_id'] : ['consumer', 'message_id', 'day'];
        expect(await columnsOf('inbox')).toEqual([...key, ...HOT_COLUMNS]);
        expect(await columnsOf('inbox_details')).toEqual([...key, ...DETAIL_COLUMNS]);
      });
    }
  });
});
