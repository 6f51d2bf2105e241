// Replays the console started, while they run and after: each is one `replayFromDlq` run (the CLI's path), its
// per-message results as they happen (the page's live progress) and its summary. Closing the console stops
// every run after the message in hand — nothing taken is lost, as with Ctrl-C on `inboxkit dlq replay`.

import type { ReplayEntryResult, ReplaySummary } from '../replay/replay-dead-letters.js';

/** What a watcher of a job is told. */
export type ReplayJobEvent =
  | { readonly type: 'entry'; readonly entry: ReplayEntryResult }
  | { readonly type: 'done'; readonly job: ReplayJobView };

/** A replay the console started, as the page sees it. */
export interface ReplayJobView {
  readonly id: string;
  readonly dlq: string;
  readonly requestedBy: string;
  readonly ratePerSecond: number | undefined;
  /** How many dead letters were selected (the ids asked for), when known. */
  readonly total: number | undefined;
  readonly startedAt: Date;
  readonly state: 'running' | 'done' | 'failed';
  readonly entries: readonly ReplayEntryResult[];
  readonly summary: ReplaySummary | undefined;
  /** Why the run failed as a whole (the DLQ could not be opened …). */
  readonly error: string | undefined;
}

interface Job {
  view: ReplayJobView;
  readonly watchers: Set<(event: ReplayJobEvent) => void>;
  readonly done: Promise<void>;
}

/** The console's replays, by replay id. Keeps the last 50 finished ones. */
export class ReplayJobs {
  readonly #jobs = new Map<string, Job>();
  readonly #abort = new AbortController();

  /**
   * Starts `run` as job `id`. `run` receives the per-entry callback and the console's stop signal, and
   * resolves to the replay's summary.
   */
  start(
    view: Pick<ReplayJobView, 'id' | 'dlq' | 'requestedBy' | 'ratePerSecond' | 'total'>,
    run: (onEntry: (entry: ReplayEntryResult) => void, signal: AbortSignal) => Promise<ReplaySummary>,
  ): ReplayJobView {
    const watchers = new Set<(event: ReplayJobEvent) => void>();
    const job: Job = {
      view: {
        ...view,
        startedAt: new Date(),
        state: 'running',
        entries: [],
        summary: undefined,
        error: undefined,
      },
      watchers,
      done: Promise.resolve(),
    };
    const emit = (event: ReplayJobEvent): void => {
      for (const watcher of watchers) watcher(event);
    };
    const entries: ReplayEntryResult[] = [];
    (job as { done: Promise<void> }).done = run((entry) => {
      entries.push(entry);
      job.view = { ...job.view, entries };
      emit({ type: 'entry', entry });
    }, this.#abort.signal).then(
      (summary) => {
        job.view = { ...job.view, state: 'done', summary, entries: summary.entries };
        emit({ type: 'done', job: job.view });
      },
      (error: unknown) => {
        job.view = {
          ...job.view,
          state: 'failed',
          error: error instanceof Error ? error.message : String(error),
        };
        emit({ type: 'done', job: job.view });
      },
    );
    this.#jobs.set(view.id, job);
    this.#trim();
    return job.view;
  }

  /** The job's current view, or `undefined`. */
  get(id: string): ReplayJobView | undefined {
    return this.#jobs.get(id)?.view;
  }

  /** Every job, newest first. */
  list(): ReplayJobView[] {
    return [...this.#jobs.values()].map((j) => j.view).reverse();
  }

  /** Calls `watcher` with each event of job `id` from now on; returns the function that stops it. */
  watch(id: string, watcher: (event: ReplayJobEvent) => void): () => void {
    const job = this.#jobs.get(id);
    if (job === undefined) return () => undefined;
    job.watchers.add(watcher);
    return () => job.watchers.delete(watcher);
  }

  /** Stops every running job after the message in hand and waits for them. */
  async stop(): Promise<void> {
    this.#abort.abort();
    await Promise.all([...this.#jobs.values()].map((j) => j.done));
  }

  #trim(): void {
    const finished = [...this.#jobs.entries()].filter(([, j]) => j.view.state !== 'running');
    for (const [id] of finished.slice(0, Math.max(0, finished.length - 50))) this.#jobs.delete(id);
  }
}
