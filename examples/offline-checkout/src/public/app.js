// The checkout page: every "Place order" is an intent in @inboxkit/client's queue. The key is minted when the
// order is placed and stored with it (IndexedDB), so a retry, a reload or a sync after being offline sends the
// same key, and the server applies the order once.
import { createIntentQueue } from '/client.js';

const queue = createIntentQueue({ name: 'checkout' });
const $ = (id) => document.getElementById(id);
// The same form placed twice before its order went through (a double click, a frozen screen tapped again) is the
// same logical order: its dedupe key is the cart and the form, and enqueue returns the intent already stored.
let cart = localStorage.getItem('cart') ?? crypto.randomUUID();
localStorage.setItem('cart', cart);

$('place').addEventListener('click', async () => {
  const body = { item: $('item').value, quantity: Number($('quantity').value) };
  const dedupeKey = `${cart}:${body.item}:${body.quantity}`;
  const order = await queue.enqueue({ url: '/api/orders', body, dedupeKey });
  const done = await order.settled();
  // Once the order is answered, the cart is a new one: the next click is a new order.
  if (done.state === 'succeeded' && localStorage.getItem('cart') === cart) {
    localStorage.setItem('cart', (cart = crypto.randomUUID()));
  }
  void refreshOrders();
});

const cell = (text, className) => {
  const td = document.createElement('td');
  if (className) {
    const span = document.createElement('span');
    span.className = `state ${className}`;
    span.textContent = text;
    td.append(span);
  } else td.textContent = text;
  return td;
};

async function render() {
  const rows = (await queue.list()).reverse().map((intent) => {
    const tr = document.createElement('tr');
    const body = JSON.parse(intent.body ?? '{}');
    const answer = intent.response
      ? `${intent.response.status}${intent.response.replayed ? ' (replayed)' : ''}`
      : (intent.failure ?? intent.lastError ?? '');
    const code = document.createElement('code');
    code.textContent = `${intent.key.slice(0, 8)}…`;
    const keyCell = document.createElement('td');
    keyCell.append(code);
    tr.append(
      cell(`${body.quantity} × ${body.item}`),
      keyCell,
      cell(intent.state, intent.state),
      cell(answer),
    );
    return tr;
  });
  $('intents').replaceChildren(...rows);
}

async function refreshOrders() {
  try {
    const orders = await (await fetch('/api/orders')).json();
    $('orders').replaceChildren(
      ...orders.map((o) => {
        const tr = document.createElement('tr');
        tr.append(cell(o.id), cell(o.item), cell(String(o.quantity)));
        return tr;
      }),
    );
  } catch {
    // offline: the list stays as it was
  }
}

function showNetwork() {
  $('net').textContent = navigator.onLine ? 'online' : 'offline';
  $('net').className = navigator.onLine ? 'net' : 'net offline';
  if (navigator.onLine) void refreshOrders();
}

queue.subscribe(() => void render());
addEventListener('online', showNetwork);
addEventListener('offline', showNetwork);
showNetwork();
void render();
window.checkout = { queue };
