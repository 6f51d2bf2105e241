// Runs one bench script as a child process (its own Node, so one section's heap and connections never weigh
// on the next), with a time limit, keeping everything it prints for the report.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';

import { REPO_ROOT, RESULT_PREFIX } from './settings.js';

export interface ChildRun {
  readonly command: string;
  readonly output: string;
  readonly code: number | null;
  readonly timedOut: boolean;
  readonly seconds: number;
  /** The JSON after `BENCH_RESULT ` on the last such line, if any. */
  readonly result: unknown;
  readonly missing: boolean;
}

let current: ReturnType<typeof spawn> | undefined;

/** Stops the section script running now (the runner is being interrupted). */
export function killCurrentScript(): void {
  current?.kill('SIGTERM');
}

/**
 * `node --import tsx <script> ...args`, from the repository root. By default `@inboxkit/*` imports resolve to
 * the built packages (dist/, what users run); `source: true` adds `--conditions=@inboxkit/source`, so they
 * resolve to the TypeScript sources (`npm run bench -- --source`).
 */
export async function runScript(
  script: string,
  args: readonly string[],
  options: {
    readonly timeoutSeconds: number;
    readonly nodeArgs?: readonly string[];
    readonly echo?: boolean;
    readonly source?: boolean;
  },
): Promise<ChildRun> {
  const conditions = options.source ? ['--conditions=@inboxkit/source'] : [];
  const command = ['node', ...conditions, '--import tsx', script, ...args].join(' ').trim();
  if (!existsSync(`${REPO_ROOT}${script}`)) {
    return {
      command,
      output: `${script} is not in this checkout`,
      code: null,
      timedOut: false,
      seconds: 0,
      result: undefined,
      missing: true,
    };
  }
  const started = Date.now();
  const child = spawn(
    process.execPath,
    [...(options.nodeArgs ?? []), ...conditions, '--import', 'tsx', script, ...args],
    {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    },
  );
  current = child;
  let output = '';
  const take = (d: Buffer): void => {
    output += d.toString();
    if (options.echo) process.stderr.write(d);
  };
  child.stdout.on('data', take);
  child.stderr.on('data', take);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
  }, options.timeoutSeconds * 1_000);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  clearTimeout(timer);
  current = undefined;
  const resultLine = output
    .split('\n')
    .filter((l) => l.startsWith(RESULT_PREFIX))
    .at(-1);
  let result: unknown;
  if (resultLine !== undefined) {
    try {
      result = JSON.parse(resultLine.slice(RESULT_PREFIX.length));
    } catch {
      result = undefined;
    }
  }
  const shown = output
    .split('\n')
    .filter((l) => !l.startsWith(RESULT_PREFIX))
    .join('\n')
    .trimEnd();
  return {
    command,
    output: shown,
    code,
    timedOut,
    seconds: (Date.now() - started) / 1000,
    result,
    missing: false,
  };
}
