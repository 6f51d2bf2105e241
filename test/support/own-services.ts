// Starts the project's own services (scripts/services/services.sh) for one run when discovery found none, and
// stops exactly those again: at the end of the run, on Ctrl-C or any other exit of this process (an 'exit'
// handler), and, when this process dies without running it (SIGKILL, a closed terminal), from a detached
// watchdog (`services.sh stop-after PID`). Services that were running before the run are never touched.
//
// INBOXKIT_KEEP_SERVICES=1 leaves the services it started running (CI's torture and bench steps reuse them).
//
// Before starting anything it asks `services.sh check` what is missing: system packages it cannot install
// (not root) fail the run at once with the command to run; packages it will install and jars it will fetch
// are announced, since the first start takes minutes.
import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, openSync, closeSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { CATALOG, REPO_ROOT, SERVICES_DIR, SERVICES_SCRIPT, type ServiceName } from './discovery.js';

const execFileAsync = promisify(execFile);

/** The project's own services could not be started; the message says what to do. */
export class ServicesNotStartedError extends Error {
  override name = 'ServicesNotStartedError';
}

export interface StartedServices {
  /** The services this run started (services.sh names). */
  readonly started: readonly string[];
  /** Stops them (once; later calls do nothing). */
  stop: () => Promise<void>;
}

const SCRIPT = relative(process.cwd(), SERVICES_SCRIPT) || SERVICES_SCRIPT;

/**
 * Starts the own services of `names`, waits until they answer and returns how to stop them. Progress goes to
 * `log` and, from services.sh, to stderr. Throws ServicesNotStartedError, having stopped whatever it started,
 * when they cannot be started.
 */
export async function startOwnServices(
  names: readonly ServiceName[],
  options: {
    log: (message: string) => void;
    /** The command to run again once the user fixed things. */ again: string;
  },
): Promise<StartedServices> {
  const { log } = options;
  const scripts = names.map((name) => CATALOG[name].script);
  await announce(scripts, options);

  if (process.env['INBOXKIT_KEEP_SERVICES'] === '1') return keepRunning(scripts, log);

  // Armed before `up`: a run interrupted while the services start still stops what had started.
  let watchdog = startWatchdog(scripts);
  // What this run stops: what its `up` started. A service found running by then (another run's chaos test
  // restarted it while discovery looked, or someone started it by hand) is left running.
  let ours: readonly string[] = scripts;
  let stopped = false;
  const stopNow = () => {
    if (stopped) return;
    stopped = true;
    killWatchdog(watchdog);
    if (ours.length === 0) return;
    log(`stopping ${ours.join(', ')} (started for this run)`);
    spawnSync('bash', [SERVICES_SCRIPT, 'down', ...ours], { stdio: ['ignore', 'inherit', 'inherit'] });
  };
  process.once('exit', stopNow);

  const started = Date.now();
  log(
    `starting ${scripts.join(', ')}: bash ${SCRIPT} up ${scripts.join(' ')} ` +
      `(stopped again when the run ends; \`npm run services:up\` keeps them running between runs)`,
  );
  const up = await runScript(['up', ...scripts]);
  if (up.code !== 0) {
    process.off('exit', stopNow);
    stopNow();
    throw new ServicesNotStartedError(
      `could not start ${scripts.join(', ')} (\`bash ${SCRIPT} up ${scripts.join(' ')}\` exited with ${up.code}): ` +
        `${lastError(up.stderr)} Logs: ${relative(process.cwd(), join(SERVICES_DIR, 'logs')) || SERVICES_DIR}`,
    );
  }
  ours = scripts.filter((script) => up.started.includes(script));
  const already = scripts.filter((script) => !ours.includes(script));
  killWatchdog(watchdog);
  watchdog = ours.length > 0 ? startWatchdog(ours) : undefined;
  log(
    `${scripts.join(', ')} ready in ${seconds(Date.now() - started)}` +
      (already.length > 0 ? ` (${already.join(', ')} found running meanwhile: left running at the end)` : ''),
  );

  return {
    started: ours,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      process.off('exit', stopNow);
      killWatchdog(watchdog);
      if (ours.length === 0) return;
      const t0 = Date.now();
      const down = await runScript(['down', ...ours]);
      if (down.code !== 0) throw new Error(`stopping ${ours.join(', ')} failed: ${lastError(down.stderr)}`);
      log(`stopped ${ours.join(', ')} (started for this run) in ${seconds(Date.now() - t0)}`);
    },
  };
}

/** INBOXKIT_KEEP_SERVICES=1: starts them like `npm run services:up` would, and leaves them running. */
async function keepRunning(
  scripts: readonly string[],
  log: (message: string) => void,
): Promise<StartedServices> {
  const started = Date.now();
  log(
    `starting ${scripts.join(', ')}: bash ${SCRIPT} up ${scripts.join(' ')} (INBOXKIT_KEEP_SERVICES=1: left running)`,
  );
  const up = await runScript(['up', ...scripts]);
  if (up.code !== 0) {
    throw new ServicesNotStartedError(`could not start ${scripts.join(', ')}: ${lastError(up.stderr)}`);
  }
  log(`${scripts.join(', ')} ready in ${seconds(Date.now() - started)}`);
  return {
    started: scripts,
    stop: async () =>
      log(
        `${scripts.join(', ')} left running (INBOXKIT_KEEP_SERVICES=1); \`npm run services:down\` stops them`,
      ),
  };
}

/** Fails at once when packages are missing and cannot be installed; says what a first start fetches. */
async function announce(
  scripts: readonly string[],
  { log, again }: { log: (message: string) => void; again: string },
): Promise<void> {
  let output: string;
  try {
    output = (await execFileAsync('bash', [SERVICES_SCRIPT, 'check', ...scripts])).stdout;
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string; message: string };
    const detail = (e.stdout?.trim() || lastError(e.stderr ?? '') || e.message).trim();
    const hint = e.code === 3 ? ` Then run \`${again}\` again.` : '';
    throw new ServicesNotStartedError(
      `${scripts.join(', ')} ${scripts.length === 1 ? 'is' : 'are'} needed and not running, and cannot be started here: ${detail}.${hint}`,
    );
  }
  for (const line of output.split('\n')) {
    const [verb, ...what] = line.trim().split(/\s+/);
    if (verb === 'install')
      log(`first start: installing ${what.join(', ')} with apt-get (a few minutes, once)`);
    if (verb === 'fetch')
      log(`first start: fetching the ${what.join(' and ')} jars from Maven Central (once)`);
    if (verb === 'build') log(`first start: building ${what.join(' and ')} with go install (once)`);
  }
}

/** Runs services.sh; `started` is what an `up` started (its `started NAME` lines on stdout). */
function runScript(args: string[]): Promise<{ code: number; stderr: string; started: string[] }> {
  return new Promise((resolvePromise) => {
    // services.sh reports its progress on stderr, one line per step: shown as it comes, kept for the error.
    const child = spawn('bash', [SERVICES_SCRIPT, ...args], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      process.stderr.write(chunk);
    });
    const started = () =>
      stdout
        .split('\n')
        .map((line) => /^started (\S+)$/.exec(line.trim())?.[1])
        .filter((name): name is string => name !== undefined);
    child.once('error', (error) =>
      resolvePromise({ code: 127, stderr: `${stderr}\nERROR: ${error.message}`, started: started() }),
    );
    child.once('close', (code) => resolvePromise({ code: code ?? 1, stderr, started: started() }));
  });
}

function startWatchdog(scripts: readonly string[]): number | undefined {
  mkdirSync(join(SERVICES_DIR, 'logs'), { recursive: true });
  const logFd = openSync(join(SERVICES_DIR, 'logs', 'stop-after.log'), 'a');
  try {
    // Detached: its own session, so a Ctrl-C in the terminal does not reach it.
    const child = spawn('bash', [SERVICES_SCRIPT, 'stop-after', String(process.pid), ...scripts], {
      cwd: REPO_ROOT,
      detached: true,
      stdio: ['ignore', logFd, logFd],
    });
    child.unref();
    return child.pid;
  } finally {
    closeSync(logFd);
  }
}

function killWatchdog(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGTERM'); // its process group: bash and its `sleep`
  } catch {
    // already gone
  }
}

function lastError(stderr: string): string {
  const lines = stderr.split('\n').filter((line) => line.trim() !== '');
  const error = [...lines].reverse().find((line) => line.includes('ERROR:'));
  return (error ?? lines.at(-1) ?? '').replace(/^.*ERROR:\s*/, '').trim();
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
