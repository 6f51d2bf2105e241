// What partition maintenance did to one day: maintain-inbox-partitions.ts reports it, partition-metrics.ts counts it.

/**
 * One day's step. `created`/`dropped`: done, with the rows moved (in from the default partition, or — the
 * open rows of a dropped day — out to it). `kept`: old enough but a completed row in it is still inside its
 * own window. `busy`: the lock timeout passed. `would-create`/`would-drop`: a dry run's, with the open rows a
 * drop would move.
 */
export type PartitionStep =
  | { readonly action: 'created' | 'dropped'; readonly day: string; readonly movedRows: number }
  | { readonly action: 'kept'; readonly day: string; readonly reason: 'unexpired' | 'within-window' }
  | { readonly action: 'busy'; readonly day: string; readonly change: 'create' | 'drop' }
  | { readonly action: 'would-create'; readonly day: string }
  | {
      readonly action: 'would-drop';
      readonly day: string;
      readonly openRows: number;
      readonly unexpired: boolean;
    };
