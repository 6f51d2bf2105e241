// The benches' topics: a source topic and its `.dlq`, created with kafkajs' admin.

import type { Admin } from 'kafkajs';

/**
 * Creates `topic` (`partitions` partitions) and `<topic>.dlq` (1) and waits for their leaders. A busy broker
 * sometimes answers the leader wait with "does not host this topic-partition" before the topic's metadata is
 * there: asked again for up to 30 s.
 */
export async function createBenchTopics(admin: Admin, topic: string, partitions: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await admin.createTopics({
        waitForLeaders: true,
        topics: [
          { topic, numPartitions: partitions },
          { topic: `${topic}.dlq`, numPartitions: 1 },
        ],
      });
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
