// `inboxkit doctor`: connectivity and configuration invariants, each failure with what to change.

import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';

import { ConfigurationError } from '@inboxkit/core';

import type { DoctorCommand } from '../command-line.js';
import { readConsumerSettings } from '../doctor/consumer-settings.js';
import { diagnose } from '../doctor/diagnose.js';
import type { DoctorReport } from '../doctor/diagnose.js';
import { formatTable } from '../output/format-table.js';
import { writeJson } from '../output/write-json.js';
import type { CommandContext } from './command-context.js';
import { EXIT } from './command-context.js';
import { displayText } from '../output/display-text.js';

async function readConfig(path: string | undefined, cwd: string): Promise<unknown> {
  if (path === undefined) return undefined;
  const file = resolve(cwd, path);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new ConfigurationError(`cannot read --config ${path}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new ConfigurationError(`--config ${path} is not valid JSON: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/** Runs `doctor`; returns the exit code. */
export async function runDoctor(command: DoctorCommand, context: CommandContext): Promise<number> {
  const { io, services } = context;
  const config = await readConfig(command.configPath, io.cwd ?? process.cwd());
  const consumers = readConsumerSettings(config, command.settings, command.configPath ?? 'flags');
  const report = await diagnose({
    connection: command.connection,
    services,
    consumers,
    transport: command.transport,
    source: command.source,
    dlq: command.dlq,
    env: io.env,
  });
  if (command.json) writeJson(io.stdout, report);
  else io.stdout.write(renderDoctor(report));
  return report.ok ? EXIT.ok : EXIT.failed;
}

/** The human-readable report. */
export function renderDoctor(report: DoctorReport): string {
  const mark = { ok: 'ok', warn: 'WARN', fail: 'FAIL', skip: 'skip' } as const;
  const lines = [
    formatTable(
      ['check', 'result', 'detail'],
      report.checks.map((c) => [c.name, mark[c.status], c.detail]),
    ),
  ];
  const todo = report.checks.filter(
    (c) => (c.status === 'fail' || c.status === 'warn') && c.fix !== undefined,
  );
  if (todo.length > 0) {
    lines.push('What to change:');
    for (const c of todo) lines.push(`  - ${displayText(c.name)}: ${displayText(c.fix ?? '')}`);
    lines.push('');
  }
  lines.push(
    report.ok
      ? 'All checks passed.'
      : `${report.checks.filter((c) => c.status === 'fail').length} check(s) failed.`,
  );
  return `${lines.join('\n')}\n`;
}
