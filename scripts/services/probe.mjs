// Readiness probes for services.sh, with no dependencies (they run before `npm ci` has to exist).
//
//   node probe.mjs kafka 127.0.0.1:19092   exit 0 when the broker answers a Metadata request and lists at
//                                           least one live broker (in KRaft a broker is listed only once it
//                                           is registered and unfenced, i.e. ready for clients)
//   node probe.mjs amqp 127.0.0.1:5679      exit 0 when the server answers the AMQP 0-9-1 protocol header with
//                                           connection.start (RabbitMQ opens its listener only once booted)
//   node probe.mjs tcp 127.0.0.1:5679       exit 0 when a TCP connection opens
import net from 'node:net';

const [kind, address] = process.argv.slice(2);
if (!kind || !address) {
  console.error('usage: probe.mjs kafka|amqp|tcp HOST:PORT');
  process.exit(2);
}
const [host, portText] = address.split(':');
const port = Number(portText);

function connect(timeoutMs) {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('timeout'));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

// Kafka Metadata request v1 (api key 3): all topics (null array). Response v1: correlation id, brokers array.
async function kafkaBrokers() {
  const socket = await connect(3000);
  try {
    const clientId = Buffer.from('inboxkit-probe');
    const body = Buffer.alloc(2 + 2 + 4 + 2 + clientId.length + 4);
    let o = 0;
    o = body.writeInt16BE(3, o); // api key: Metadata
    o = body.writeInt16BE(1, o); // api version
    o = body.writeInt32BE(42, o); // correlation id
    o = body.writeInt16BE(clientId.length, o);
    o += clientId.copy(body, o);
    body.writeInt32BE(-1, o); // topics: null = all
    const frame = Buffer.alloc(4);
    frame.writeInt32BE(body.length);
    socket.write(Buffer.concat([frame, body]));

    const response = await new Promise((resolve, reject) => {
      let buffered = Buffer.alloc(0);
      const timer = setTimeout(() => reject(new Error('no metadata response')), 5000);
      socket.on('data', (chunk) => {
        buffered = Buffer.concat([buffered, chunk]);
        if (buffered.length >= 4 && buffered.length >= 4 + buffered.readInt32BE(0)) {
          clearTimeout(timer);
          resolve(buffered.subarray(4, 4 + buffered.readInt32BE(0)));
        }
      });
      socket.once('error', reject);
      socket.once('close', () => reject(new Error('connection closed')));
    });
    if (response.readInt32BE(0) !== 42) throw new Error('unexpected correlation id');
    return response.readInt32BE(4); // number of brokers
  } finally {
    socket.destroy();
  }
}

// AMQP 0-9-1: after the protocol header the server sends connection.start, a method frame (type 1, channel 0,
// class 10, method 10).
async function amqpAnswers() {
  const socket = await connect(3000);
  try {
    socket.write(Buffer.from([0x41, 0x4d, 0x51, 0x50, 0, 0, 9, 1]));
    const head = await new Promise((resolve, reject) => {
      let buffered = Buffer.alloc(0);
      const timer = setTimeout(() => reject(new Error('no connection.start')), 5000);
      socket.on('data', (chunk) => {
        buffered = Buffer.concat([buffered, chunk]);
        if (buffered.length >= 11) {
          clearTimeout(timer);
          resolve(buffered);
        }
      });
      socket.once('error', reject);
      socket.once('close', () => reject(new Error('connection closed')));
    });
    if (head[0] !== 1 || head.readUInt16BE(7) !== 10 || head.readUInt16BE(9) !== 10) {
      throw new Error('not an AMQP 0-9-1 connection.start');
    }
  } finally {
    socket.destroy();
  }
}

try {
  if (kind === 'amqp') {
    await amqpAnswers();
  } else if (kind === 'kafka') {
    const brokers = await kafkaBrokers();
    if (brokers < 1) throw new Error('no live broker yet');
  } else if (kind === 'tcp') {
    (await connect(3000)).destroy();
  } else {
    throw new Error(`unknown probe ${kind}`);
  }
  process.exit(0);
} catch (error) {
  console.error(`${kind} ${address}: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
