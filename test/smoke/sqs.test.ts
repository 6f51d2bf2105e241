// Smoke: a real SQS-compatible server (ElasticMQ): create a queue, send, receive, delete.
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, describe, expect, it } from 'vitest';
import { requireService, uniqueTestName } from '../support/services.js';

describe('sqs smoke', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  });

  it('creates a queue, sends, receives and deletes a message', async () => {
    const { endpoint, region, credentials } = requireService('sqs');
    const sqs = new SQSClient({ endpoint, region, credentials });
    cleanups.push(async () => sqs.destroy());

    const { QueueUrl } = await sqs.send(
      new CreateQueueCommand({
        QueueName: uniqueTestName('smoke-queue'),
        Attributes: { VisibilityTimeout: '30' },
      }),
    );
    expect(QueueUrl).toBeTruthy();
    cleanups.push(async () => {
      await sqs.send(new DeleteQueueCommand({ QueueUrl }));
    });

    const sent = await sqs.send(
      new SendMessageCommand({
        QueueUrl,
        MessageBody: JSON.stringify({ hello: 'sqs' }),
        MessageAttributes: { 'message-id': { DataType: 'String', StringValue: 'm-1' } },
      }),
    );
    expect(sent.MessageId).toBeTruthy();

    const received = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl,
        MaxNumberOfMessages: 1,
        WaitTimeSeconds: 5,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['ApproximateReceiveCount'],
      }),
    );
    const message = received.Messages?.[0];
    expect(message?.Body).toBe('{"hello":"sqs"}');
    expect(message?.MessageId).toBe(sent.MessageId);
    expect(message?.MessageAttributes?.['message-id']?.StringValue).toBe('m-1');
    expect(message?.Attributes?.ApproximateReceiveCount).toBe('1');

    await sqs.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: message?.ReceiptHandle }));

    const attributes = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    expect(attributes.Attributes?.ApproximateNumberOfMessages).toBe('0');
    expect(attributes.Attributes?.ApproximateNumberOfMessagesNotVisible).toBe('0');
  });
});
