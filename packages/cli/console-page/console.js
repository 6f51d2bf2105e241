// @ts-check
// The console's page: no framework, no build. It reads the JSON API of `inboxkit console`, draws the charts
// as SVG, and never puts data into HTML: every value from a message (ids, errors, payloads, headers) is set
// as text, so a dead letter cannot run script in the operator's browser.

import { displayName, displayText, hasUnsafeCharacters } from './display-text.js';

const SVG = 'http://www.w3.org/2000/svg';
const STATES = /** @type {const} */ (['completed', 'processing', 'failed', 'dead_lettered']);
const STATE_LABEL = {
  completed: 'completed',
  processing: 'processing',
  failed: 'failed (retrying)',
  dead_lettered: 'dead-lettered',
};

/** @type {{ overview: any, listing: any, selected: Set<string>, jobSource: EventSource | undefined, offset: number }} */
const state = {
  overview: undefined,
  listing: undefined,
  selected: new Set(),
  jobSource: undefined,
  offset: 0,
};
/** Dead letters per page of the listing. */
const PAGE_SIZE = 100;

/** Attributes a person reads: shown through the display rule like text. */
const READ_ATTRIBUTES = new Set(['title', 'aria-label']);

/**
 * An element with attributes and children; strings become text nodes. Every string a person reads (text,
 * `title`, `aria-label`) goes through the CLI's display rule (display-text.js): a bidi override or an
 * invisible character shows as its escape, never raw; inside `<pre>` line breaks stay line breaks.
 * @param {string} tag
 * @param {Record<string, string | number | boolean | undefined>} [attrs]
 * @param {...(Node | string | number | undefined | null | false)} children
 * @returns {HTMLElement}
 */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (k === 'class') el.className = String(v);
    else el.setAttribute(k, v === true ? '' : READ_ATTRIBUTES.has(k) ? displayText(String(v)) : String(v));
  }
  const multiline = tag === 'pre';
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    el.append(
      typeof c === 'string' || typeof c === 'number'
        ? document.createTextNode(displayText(String(c), { multiline }))
        : c,
    );
  }
  return el;
}

/**
 * An SVG element.
 * @param {string} tag
 * @param {Record<string, string | number>} [attrs]
 * @returns {SVGElement}
 */
function s(tag, attrs = {}) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/** @param {string} selector @returns {HTMLElement} */
function $(selector) {
  const el = document.querySelector(selector);
  if (!(el instanceof HTMLElement)) throw new Error(`missing ${selector}`);
  return el;
}

/** @param {number} n */
const fmt = (n) => n.toLocaleString('en-US');

/** @param {string | undefined | null} iso */
function when(iso) {
  if (iso === undefined || iso === null) return '–';
  const d = new Date(iso);
  return `${d.toISOString().slice(0, 10)} ${d.toTimeString().slice(0, 8)}`;
}

/**
 * Calls the API; a non-2xx answer becomes an Error with the server's message.
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<any>}
 */
async function api(path, body) {
  const init =
    body === undefined
      ? {}
      : {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-inboxkit-console': '1' },
          body: JSON.stringify(body),
        };
  const response = await fetch(path, init);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error ?? `${response.status} ${response.statusText}`);
  return data;
}

/** @param {string} text @param {boolean} [error] */
function status(text, error = false) {
  const el = $('#status');
  el.textContent = text;
  el.classList.toggle('error', error);
}

// ---------------------------------------------------------------------------------------------- charts

/**
 * A sparkline of one state's count over the samples, with the latest value large.
 * @param {string} label @param {string} cls @param {number[]} values @param {string[]} times
 */
function stateTile(label, cls, values, times) {
  const w = 180;
  const ht = 44;
  const svg = s('svg', {
    viewBox: `0 0 ${w} ${ht}`,
    preserveAspectRatio: 'none',
    class: 'spark',
    role: 'img',
    'aria-label': `${label} over time`,
  });
  const max = Math.max(1, ...values);
  const min = Math.min(...values, max);
  const span = Math.max(1, max - min);
  if (values.length > 1) {
    const line = values
      .map(
        (v, i) =>
          `${((i / (values.length - 1)) * w).toFixed(1)},${(ht - 4 - ((v - min) / span) * (ht - 8)).toFixed(1)}`,
      )
      .join(' ');
    svg.append(s('polygon', { points: `0,${ht} ${line} ${w},${ht}`, class: `area ${cls}` }));
    svg.append(s('polyline', { points: line, class: `line ${cls}` }));
  } else {
    svg.append(s('line', { x1: 0, x2: w, y1: ht - 4, y2: ht - 4, class: `line ${cls}` }));
  }
  const first = times[0];
  const last = values[values.length - 1] ?? 0;
  const change = values.length > 1 ? last - (values[0] ?? 0) : 0;
  return h(
    'div',
    { class: `tile ${cls}`, 'data-state': cls },
    h('div', { class: 'tile-label' }, label),
    h('div', { class: 'tile-value' }, fmt(last)),
    h(
      'div',
      { class: 'tile-change' },
      change === 0
        ? 'no change'
        : `${change > 0 ? '+' : ''}${fmt(change)} since ${first ? when(first).slice(11, 16) : ''}`,
    ),
    svg,
  );
}

/**
 * Bars per hour for the last 24 hours: dead-lettered (red) and replayed (blue) side by side.
 * @param {string} hourStart @param {number[]} dead @param {number[]} replayed
 */
function hourlyChart(hourStart, dead, replayed) {
  const w = 480;
  const ht = 120;
  const pad = { l: 28, r: 6, t: 8, b: 18 };
  const max = Math.max(1, ...dead, ...replayed);
  const svg = s('svg', {
    viewBox: `0 0 ${w} ${ht}`,
    class: 'hourly',
    role: 'img',
    'aria-label': 'dead-lettered and replayed per hour, last 24 hours',
  });
  const innerW = w - pad.l - pad.r;
  const innerH = ht - pad.t - pad.b;
  const slot = innerW / 24;
  for (const frac of [0, 0.5, 1]) {
    const y = pad.t + innerH - frac * innerH;
    svg.append(s('line', { x1: pad.l, x2: w - pad.r, y1: y, y2: y, class: 'grid' }));
    const t = s('text', { x: pad.l - 4, y: y + 3, class: 'axis', 'text-anchor': 'end' });
    t.textContent = String(Math.round(frac * max));
    svg.append(t);
  }
  const start = new Date(hourStart).getTime();
  for (let i = 0; i < 24; i += 1) {
    const x = pad.l + i * slot;
    const d = dead[i] ?? 0;
    const r = replayed[i] ?? 0;
    const hd = (d / max) * innerH;
    const hr = (r / max) * innerH;
    const bar = s('rect', {
      x: x + 1,
      y: pad.t + innerH - hd,
      width: slot / 2 - 1,
      height: hd,
      class: 'bar dead',
    });
    const title = s('title');
    title.textContent = `${new Date(start + i * 3_600_000).toTimeString().slice(0, 5)}: ${d} dead-lettered, ${r} replayed`;
    bar.append(title);
    svg.append(bar);
    svg.append(
      s('rect', {
        x: x + slot / 2,
        y: pad.t + innerH - hr,
        width: slot / 2 - 1,
        height: hr,
        class: 'bar replayed',
      }),
    );
    if (i % 6 === 0) {
      const t = s('text', { x, y: ht - 4, class: 'axis' });
      t.textContent = new Date(start + i * 3_600_000).toTimeString().slice(0, 5);
      svg.append(t);
    }
  }
  return h(
    'figure',
    { class: 'hourly-figure' },
    svg,
    h(
      'figcaption',
      {},
      h('span', { class: 'key dead' }),
      'dead-lettered ',
      h('span', { class: 'key replayed' }),
      'replayed, per hour (last 24 h)',
    ),
  );
}

/** @param {any} overview */
function renderConsumers(overview) {
  const cards = $('#consumer-cards');
  cards.replaceChildren();
  if (overview.consumers.length === 0) {
    cards.append(h('p', { class: 'note' }, 'The inbox has no rows yet.'));
    return;
  }
  /** @type {any[]} */
  const samples = overview.samples;
  const times = samples.map((x) => x.at);
  for (const c of overview.consumers) {
    const tiles = h('div', { class: 'tiles' });
    for (const st of STATES) {
      const values = samples.map((x) => x.consumers[c.consumer]?.[st] ?? 0);
      if (values.length === 0) values.push(c.rows[st]);
      values[values.length - 1] = c.rows[st];
      tiles.append(stateTile(STATE_LABEL[st], st, values, times));
    }
    const reasons = Object.entries(c.deadLettersByReason)
      .sort((a, b) => Number(b[1]) - Number(a[1]))
      .map(([reason, n]) => h('li', {}, h('strong', {}, fmt(Number(n))), ' ', displayName(reason)));
    const stuck = c.processing.filter((/** @type {any} */ p) => p.lease === 'expired').length;
    cards.append(
      h(
        'article',
        { class: 'card', 'data-consumer': c.consumer },
        h('h3', {}, displayName(c.consumer)),
        tiles,
        h(
          'div',
          { class: 'card-row' },
          hourlyChart(c.hourStart, c.deadLetteredPerHour, c.replayedPerHour),
          h(
            'div',
            { class: 'side' },
            h('h4', {}, 'Dead-lettered rows by reason'),
            reasons.length === 0
              ? h('p', { class: 'note' }, 'none')
              : h('ul', { class: 'reasons' }, ...reasons),
            stuck > 0 ? h('p', { class: 'warn' }, `${stuck} processing row(s) with an expired lease`) : null,
            c.replays.length > 0
              ? h(
                  'p',
                  { class: 'note' },
                  `last replay ${when(c.replays[0].at)} by ${displayName(c.replays[0].requestedBy ?? '?')}: ${c.replays[0].outcome}`,
                )
              : null,
          ),
        ),
      ),
    );
  }
}

// ---------------------------------------------------------------------------------------- dead letters

/** @param {any} overview */
function fillSelectors(overview) {
  const dlq = /** @type {HTMLSelectElement} */ ($('#f-dlq'));
  if (dlq.options.length !== overview.dlqs.length) {
    dlq.replaceChildren(...overview.dlqs.map((/** @type {any} */ d) => h('option', { value: d.id }, d.id)));
  }
  const consumer = /** @type {HTMLSelectElement} */ ($('#f-consumer'));
  const current = consumer.value;
  consumer.replaceChildren(
    h('option', { value: '' }, 'any'),
    ...overview.consumers.map((/** @type {any} */ c) =>
      h('option', { value: c.consumer }, displayName(c.consumer)),
    ),
  );
  consumer.value = current;
  // Every reason the inbox knows, so the filter does not wait for a listing to offer it.
  const reasons = new Set(
    overview.consumers.flatMap((/** @type {any} */ c) => Object.keys(c.deadLettersByReason)),
  );
  addReasons(reasons);
}

/** @param {Iterable<string>} reasons */
function addReasons(reasons) {
  const select = /** @type {HTMLSelectElement} */ ($('#f-reason'));
  const known = new Set([...select.options].map((o) => o.value));
  for (const reason of reasons)
    if (!known.has(reason)) select.append(h('option', { value: reason }, displayName(reason)));
}

/** @param {string} value */
const isoOrEmpty = (value) => (value === '' ? '' : new Date(value).toISOString());

/**
 * Lists one page of the DLQ: `offset` matching dead letters passed over (0, the first page, unless paging).
 * @param {number} [offset]
 */
async function listDeadLetters(offset = 0) {
  const form = /** @type {HTMLFormElement} */ ($('#filters'));
  const data = new FormData(form);
  /** @type {Record<string, string | number>} */
  const filters = { offset, pageSize: PAGE_SIZE };
  for (const key of ['dlq', 'consumer', 'reason', 'search']) {
    const v = String(data.get(key) ?? '');
    if (v !== '') filters[key] = v;
  }
  for (const key of ['since', 'until']) {
    const v = isoOrEmpty(String(data.get(key) ?? ''));
    if (v !== '') filters[key] = v;
  }
  if (filters.dlq === undefined) {
    $('#dlq-note').hidden = false;
    $('#dlq-note').textContent = 'This console was started without --dlq: there is no DLQ to list.';
    return;
  }
  status('reading the DLQ…');
  // A POST: reading a RabbitMQ or SQS DLQ receives and releases its messages.
  const listing = await api('/api/dead-letters', filters);
  state.listing = listing;
  state.offset = offset;
  state.selected.clear();
  renderListing(listing);
  status(
    `listed ${listing.entries.length} dead letter(s) of ${displayName(listing.dlq)}${listing.offset > 0 || listing.more ? ` (${listing.offset + 1}–${listing.offset + listing.entries.length}${listing.more ? ', more exist' : ''})` : ''} at ${new Date().toTimeString().slice(0, 8)}`,
  );
}

/** @param {any} listing */
function renderListing(listing) {
  const note = $('#dlq-note');
  const notes = [];
  if (!listing.nonDestructiveBrowse)
    notes.push(
      'This broker cannot peek: listing receives and releases each message (receive counts rise, order may change).',
    );
  if (listing.truncated) notes.push(`Only the first ${listing.read} messages were read.`);
  if (listing.more)
    notes.push(
      `Showing ${listing.offset + 1}–${listing.offset + listing.entries.length}: more dead letters match (Next page).`,
    );
  note.hidden = notes.length === 0;
  note.textContent = notes.join(' ');
  const prev = /** @type {HTMLButtonElement} */ ($('#page-prev'));
  const next = /** @type {HTMLButtonElement} */ ($('#page-next'));
  prev.disabled = listing.offset === 0;
  next.disabled = !listing.more;
  $('#page-range').textContent =
    listing.entries.length === 0
      ? ''
      : `${listing.offset + 1}–${listing.offset + listing.entries.length}${listing.more ? ' of more' : ''}`;

  // Groups by reason, largest first; a click filters by that reason.
  /** @type {Map<string, { count: number, sample: string | undefined }>} */
  const groups = new Map();
  for (const e of listing.entries) {
    const key = e.reason ?? '(no reason)';
    const g = groups.get(key) ?? { count: 0, sample: e.error };
    g.count += 1;
    groups.set(key, g);
  }
  const reasonSelect = /** @type {HTMLSelectElement} */ ($('#f-reason'));
  addReasons(groups.keys());
  $('#groups').replaceChildren(
    ...[...groups.entries()]
      .sort((a, b) => b[1].count - a[1].count)
      .map(([reason, g]) => {
        const chip = h(
          'button',
          { type: 'button', class: 'group', 'data-reason': reason, title: g.sample ?? '' },
          h('strong', {}, fmt(g.count)),
          ` ${displayName(reason)}`,
          g.sample ? h('small', {}, g.sample) : null,
        );
        chip.addEventListener('click', () => {
          reasonSelect.value = reason;
          listDeadLetters().catch(showError);
        });
        return chip;
      }),
  );

  const body = /** @type {HTMLTableSectionElement} */ ($('#dlq-table tbody'));
  body.replaceChildren(
    ...listing.entries.map((/** @type {any} */ e) => {
      const box = /** @type {HTMLInputElement} */ (
        h('input', {
          type: 'checkbox',
          'aria-label': `select ${displayName(e.id ?? e.position)}`,
          disabled: e.id === undefined,
        })
      );
      box.checked = e.id !== undefined && state.selected.has(e.id);
      box.addEventListener('change', () => {
        if (box.checked) state.selected.add(e.id);
        else state.selected.delete(e.id);
        updateSelection();
      });
      const link = h('a', { href: '#', class: 'id' }, e.id === undefined ? '(no id)' : displayName(e.id));
      link.addEventListener('click', (event) => {
        event.preventDefault();
        showMessage(e).catch(showError);
      });
      return h(
        'tr',
        { 'data-id': e.id ?? '' },
        h('td', {}, box),
        h('td', {}, link),
        h('td', {}, e.consumer === undefined ? '?' : displayName(e.consumer)),
        h('td', {}, h('span', { class: 'reason' }, e.reason === undefined ? '?' : displayName(e.reason))),
        h('td', { class: 'error', title: e.error ?? '' }, e.error ?? ''),
        h('td', { class: 'num' }, e.attempts ?? ''),
        h('td', {}, when(e.deadLetteredAt)),
        h(
          'td',
          {},
          h('span', { class: `pill ${e.inboxStatus}` }, e.inboxStatus),
          e.parked
            ? h('span', { class: 'pill parked', title: 'a replay of it failed before' }, 'parked')
            : null,
        ),
        h('td', {}, h('span', { class: `pill p-${e.prediction}` }, e.prediction)),
      );
    }),
  );
  $('#dlq-empty').hidden = listing.entries.length > 0;
  updateSelection();
}

function updateSelection() {
  const n = state.selected.size;
  $('#selected-count').textContent = `${n} selected`;
  /** @type {HTMLButtonElement} */ ($('#dry-run')).disabled = n === 0;
  /** @type {HTMLButtonElement} */ ($('#replay')).disabled = n === 0;
}

/** The selection as the API takes it. */
function selectionBody() {
  const includeParked = /** @type {HTMLInputElement} */ ($('#include-parked')).checked;
  return { dlq: state.listing?.dlq, ids: [...state.selected], includeParked };
}

async function dryRun() {
  status('dry run…');
  const summary = await api('/api/dry-run', selectionBody());
  const box = $('#dry-result');
  box.hidden = false;
  box.replaceChildren(
    h(
      'h3',
      {},
      `Dry run: ${summary.wouldReplay} would be replayed${summary.parked > 0 ? `, ${summary.parked} parked (left in the DLQ)` : ''} — nothing was published or removed`,
    ),
    h(
      'table',
      { class: 'grid' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ...['id', 'consumer', 'inbox', 'a replay would', 'to', 'note'].map((t) => h('th', {}, t)),
        ),
      ),
      h(
        'tbody',
        {},
        ...summary.entries.map((/** @type {any} */ e) =>
          h(
            'tr',
            { 'data-id': e.id ?? '' },
            h('td', {}, e.id === undefined ? '(no id)' : displayName(e.id)),
            h('td', {}, e.consumer === undefined ? '?' : displayName(e.consumer)),
            h('td', {}, h('span', { class: `pill ${e.inboxStatus}` }, e.inboxStatus)),
            h('td', {}, h('span', { class: `pill p-${e.prediction}` }, e.prediction)),
            h('td', {}, e.destination ?? '–'),
            h(
              'td',
              {},
              e.action === 'unreplayable'
                ? `not replayable: ${e.detail ?? ''}`
                : e.action === 'parked'
                  ? `left in the DLQ, ${e.detail ?? 'parked'}`
                  : (e.detail ?? ''),
            ),
          ),
        ),
      ),
    ),
  );
  status(`dry run: ${summary.wouldReplay} would be replayed`);
}

async function replay() {
  const rate = Number(/** @type {HTMLInputElement} */ ($('#rate')).value);
  const body = { ...selectionBody(), ratePerSecond: rate > 0 ? rate : undefined };
  // Until the server answers, the box still shows the previous job: its state says so at once, so nothing (a
  // person or a test) reads the old job's "done" as this one's.
  const box = $('#job');
  box.dataset.state = 'requested';
  try {
    followJob(await api('/api/replays', body));
  } catch (error) {
    box.dataset.state = 'refused';
    throw error;
  }
}

/** @param {any} job */
function followJob(job) {
  const box = $('#job');
  box.hidden = false;
  const bar = h('progress', { max: job.total ?? 1, value: 0 });
  const counts = h('span', { class: 'counts' }, 'starting…');
  const log = h('ol', { class: 'job-log' });
  box.replaceChildren(
    h(
      'h3',
      {},
      `Replay ${job.id.slice(0, 8)} by ${displayName(job.requestedBy)}${job.ratePerSecond ? ` at ${job.ratePerSecond}/s` : ''}`,
    ),
    bar,
    counts,
    log,
  );
  box.dataset.state = 'running';
  const tally = { replayed: 0, failed: 0, unreplayable: 0, parked: 0 };
  state.jobSource?.close();
  const source = new EventSource(`/api/replays/${job.id}/events`);
  state.jobSource = source;
  /** @param {any} e */
  const onEntry = (e) => {
    if (e.action === 'replayed') tally.replayed += 1;
    else if (e.action === 'failed') tally.failed += 1;
    else if (e.action === 'unreplayable') tally.unreplayable += 1;
    else if (e.action === 'parked') tally.parked += 1;
    bar.setAttribute('value', String(e.index));
    counts.textContent = `${e.index}${job.total ? ` / ${job.total}` : ''} — replayed ${tally.replayed}, failed ${tally.failed}, unreplayable ${tally.unreplayable}, parked ${tally.parked}`;
    log.prepend(
      h(
        'li',
        { class: e.action },
        `${e.id === undefined ? '(no id)' : displayName(e.id)}: ${e.action}, ${e.prediction}${e.detail ? ` (${e.detail})` : ''}`,
      ),
    );
  };
  /** @param {any} view the job once it is no longer running */
  const finish = (view) => {
    source.close();
    box.dataset.state = view.state;
    if (view.summary) {
      const sm = view.summary;
      counts.textContent = `done — replayed ${sm.replayed}, failed ${sm.failed}, unreplayable ${sm.unreplayable}, parked ${sm.parked}; stopped because ${sm.stoppedBecause}`;
      bar.setAttribute('max', String(Math.max(1, sm.entries.length)));
      bar.setAttribute('value', String(sm.entries.length));
    } else counts.textContent = `failed: ${view.error}`;
    refresh().catch(showError);
  };
  source.addEventListener('job', (event) => {
    const view = JSON.parse(/** @type {MessageEvent} */ (event).data);
    for (const e of view.entries) onEntry(e);
    // A job that ended before this stream opened (a short one, or one whose messages another operator's
    // replay took first) is sent once as it stands, with no `done` event after it.
    if (view.state !== 'running') finish(view);
  });
  source.addEventListener('entry', (event) => onEntry(JSON.parse(/** @type {MessageEvent} */ (event).data)));
  source.addEventListener('done', (event) => finish(JSON.parse(/** @type {MessageEvent} */ (event).data)));
  // The live stream lost (a proxy's timeout, a network blip): the replay goes on on the server, and the page
  // asks for the job once a second until it has ended, so it never shows a finished replay as running.
  source.onerror = () => {
    source.close();
    if (box.dataset.state !== 'running' || state.jobSource !== source) return;
    counts.textContent += ' (live progress lost; the replay goes on on the server, checking on it)';
    const poll = async () => {
      // A newer replay followed on this page replaces this one.
      while (state.jobSource === source && box.dataset.state === 'running') {
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        try {
          const view = await api(`/api/replays/${job.id}`);
          if (view.state !== 'running' && state.jobSource === source) return finish(view);
        } catch {
          // The console itself is unreachable for now: ask again.
        }
      }
    };
    poll().catch(showError);
  };
}

// ----------------------------------------------------------------------------------------- one message

/**
 * A JSON text indented for reading, its tokens untouched: numbers keep the digits they were written with (an
 * id beyond 2^53 is not rounded, as `JSON.stringify(JSON.parse(text))` would). Text that is not JSON is
 * returned as it is.
 * @param {string} text
 */
function pretty(text) {
  try {
    JSON.parse(text);
  } catch {
    return text;
  }
  let out = '';
  let depth = 0;
  const newline = () => `\n${'  '.repeat(depth)}`;
  for (let i = 0; i < text.length; i += 1) {
    const c = /** @type {string} */ (text[i]);
    if (c === '"') {
      const start = i;
      for (i += 1; text[i] !== '"'; i += 1) if (text[i] === '\\') i += 1;
      out += text.slice(start, i + 1);
    } else if (c === '{' || c === '[') {
      const close = c === '{' ? '}' : ']';
      let j = i + 1;
      while (' \t\r\n'.includes(text[j] ?? '')) j += 1;
      if (text[j] === close) {
        out += c + close;
        i = j;
      } else {
        depth += 1;
        out += c + newline();
      }
    } else if (c === '}' || c === ']') {
      depth -= 1;
      out += newline() + c;
    } else if (c === ',') out += `,${newline()}`;
    else if (c === ':') out += ': ';
    else if (!' \t\r\n\ufeff'.includes(c)) out += c;
  }
  return out;
}

/**
 * @param {string} title
 * @param {[string, unknown][]} rows
 */
function facts(title, rows) {
  return h(
    'section',
    {},
    h('h3', {}, title),
    h(
      'dl',
      { class: 'facts' },
      ...rows.flatMap(([k, v]) => [
        h('dt', {}, k),
        h(
          'dd',
          {},
          v === undefined || v === null || v === ''
            ? '–'
            : typeof v === 'object'
              ? JSON.stringify(v)
              : String(v),
        ),
      ]),
    ),
  );
}

/** @param {any} entry a listed dead letter */
function showMessage(entry) {
  return showRecord(
    new URLSearchParams({ dlq: entry.dlq, position: entry.position, listing: state.listing?.listing ?? '' }),
  );
}

/**
 * The whole body of a listed dead letter whose record holds only its first bytes.
 * @param {any} m the message's record
 * @returns {Promise<string>}
 */
async function wholeBody(m) {
  const response = await fetch('/api/message-body', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-inboxkit-console': '1' },
    body: JSON.stringify({ dlq: m.dlq, position: m.deadLetter.position, listing: m.listing }),
  });
  if (!response.ok) {
    const data = await response.json().catch(() => ({}));
    throw new Error(data.error ?? `${response.status} ${response.statusText}`);
  }
  return new TextDecoder().decode(await response.arrayBuffer());
}

/**
 * The operator's acts on one message: edit and retry for a dead letter whose row is dead-lettered, forget
 * for a completed row. Each needs a typed reason; the server audits who, when and why.
 * @param {any} m the message's record
 */
function operatorActs(m) {
  const retire = retireActs(m);
  const other = editOrForgetActs(m);
  return retire === '' ? other : other === '' ? retire : h('div', {}, other, retire);
}

/**
 * Discard and archive for a dead-lettered row, discard for an archived one. Each needs a typed reason and a
 * second click (the button asks "really?"); the server audits who, when, why and the state before. A discard
 * from a DLQ listing removes the copy from that DLQ too.
 * @param {any} m the message's record
 */
function retireActs(m) {
  const row = m.row;
  if (row?.status !== 'dead_lettered' && row?.status !== 'archived') return '';
  const out = h('p', { class: 'retire-result', role: 'status' });
  const reason = /** @type {HTMLInputElement} */ (
    h('input', { id: 'retire-reason', type: 'text', placeholder: 'why (recorded in the audit)' })
  );
  /** @param {string} id @param {string} label @param {string} confirmLabel @param {() => Promise<any>} call @param {(r: any) => string} say */
  const button = (id, label, confirmLabel, call, say) => {
    const b = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', id, class: 'danger' }, label));
    let armed = false;
    b.addEventListener('click', () => {
      if (!armed) {
        armed = true;
        b.textContent = confirmLabel;
        return;
      }
      armed = false;
      b.textContent = label;
      out.textContent = 'working…';
      out.classList.remove('error');
      call()
        .then((r) => {
          out.textContent = say(r);
          refresh().catch(showError);
        })
        .catch((error) => {
          out.textContent = error instanceof Error ? error.message : String(error);
          out.classList.add('error');
        });
    });
    return b;
  };
  const discard = button(
    'discard',
    'Discard',
    'Really discard? Click again',
    () => api('/api/discard', { consumer: m.consumer, ids: [m.id], reason: reason.value, ...(m.dlq ? { dlq: m.dlq } : {}) }),
    (r) =>
      `discarded (audited under ${r.actionId.slice(0, 8)}): it will never run; a redelivery is a duplicate` +
      (r.dlq ? `; removed from the DLQ: ${r.dlq.removed.length + r.dlq.removedBrokerOnly.length}` : ''),
  );
  const archive =
    row.status === 'dead_lettered'
      ? button(
          'archive',
          'Archive',
          'Really archive? Click again',
          () => api('/api/archive', { consumer: m.consumer, ids: [m.id], reason: reason.value }),
          (r) => `archived (audited under ${r.actionId.slice(0, 8)}): kept as a record, out of the live views`,
        )
      : null;
  return h(
    'section',
    { class: 'acts' },
    h('h3', {}, 'Discard or archive'),
    h(
      'p',
      { class: 'note' },
      'Discard: this message will never run (a redelivery is acked as a duplicate) and its DLQ copy is removed. Archive: kept as a record, out of the dead-letter views; its DLQ copy stays. Both are audited and pruned after their retention.',
    ),
    h('div', { class: 'act-row' }, reason, discard, archive),
    out,
  );
}

/**
 * Edit and retry for a dead letter whose row is dead-lettered, forget for a completed row.
 * @param {any} m the message's record
 */
function editOrForgetActs(m) {
  const row = m.row;
  const out = h('p', { class: 'act-result', role: 'status' });
  /** @param {Promise<any>} call @param {(r: any) => string} say */
  const run = (call, say) => {
    out.textContent = 'working…';
    out.classList.remove('error');
    call
      .then((r) => {
        out.textContent = say(r);
        refresh().catch(showError);
      })
      .catch((error) => {
        out.textContent = error instanceof Error ? error.message : String(error);
        out.classList.add('error');
      });
  };
  if (m.deadLetter && row?.status === 'dead_lettered') {
    const payload = /** @type {HTMLTextAreaElement} */ (
      h('textarea', { id: 'edit-payload', rows: 8, spellcheck: 'false', 'aria-label': 'corrected payload' })
    );
    // The dead letter's own text, never a re-serialisation: parsing and stringifying rounds numbers beyond
    // 2^53 (an account id) and the rounded payload would be applied. The server refuses such a change too.
    payload.value = m.deadLetter.body;
    // A cut body is never sent back: the editor waits for the whole one.
    payload.disabled = m.deadLetter.bodyTruncated === true;
    const reason = /** @type {HTMLInputElement} */ (
      h('input', { id: 'edit-reason', type: 'text', placeholder: 'why (recorded in the audit)' })
    );
    const button = h('button', { type: 'button', id: 'edit-retry', class: 'primary' }, 'Edit and retry');
    button.addEventListener('click', () =>
      run(
        api('/api/edit', {
          dlq: m.dlq,
          consumer: m.consumer,
          id: m.id,
          payload: payload.value,
          reason: reason.value,
        }),
        (r) =>
          r.kind === 'replayed'
            ? `replayed with the corrected payload (${r.amended ? `amended ${String(r.fromFingerprint).slice(0, 12)}… → ${r.toFingerprint.slice(0, 12)}…` : 'already amended'}, replay ${r.replayId.slice(0, 8)})`
            : `not replayed: ${r.entry?.detail ?? r.kind}`,
      ),
    );
    return h(
      'section',
      { class: 'acts' },
      h('h3', {}, 'Edit and retry'),
      h(
        'p',
        { class: 'note' },
        'Replays this message once with the payload below under its own id. The change is audited (who, when, both fingerprints, your reason); the payload is checked against the consumer’s schema first.',
      ),
      hasUnsafeCharacters(m.deadLetter.body)
        ? h(
            'p',
            { class: 'warn' },
            'The payload holds invisible, bidi or control characters: the editor shows them raw (the Payload section below shows them escaped).',
          )
        : null,
      m.deadLetter.bodyTruncated
        ? h('p', { class: 'note' }, 'Load the whole body (Payload, below) to edit it.')
        : null,
      payload,
      h('div', { class: 'act-row' }, reason, button),
      out,
    );
  }
  if (row?.status === 'completed') {
    const reason = /** @type {HTMLInputElement} */ (
      h('input', { id: 'forget-reason', type: 'text', placeholder: 'why (recorded in the audit)' })
    );
    const button = h('button', { type: 'button', id: 'forget', class: 'danger' }, 'Forget this id');
    button.addEventListener('click', () =>
      run(
        api('/api/forget', { consumer: m.consumer, id: m.id, reason: reason.value }),
        (r) => `forgotten (audited under ${r.actionId.slice(0, 8)}): its next delivery is processed as new`,
      ),
    );
    return h(
      'section',
      { class: 'acts' },
      h('h3', {}, 'Forget'),
      h(
        'p',
        { class: 'note' },
        'Deletes this completed inbox row on purpose, so the message can be processed again. Audited.',
      ),
      h('div', { class: 'act-row' }, reason, button),
      out,
    );
  }
  return '';
}

/**
 * The payload as the listing kept it; a cut one says so, with its size, and loads whole on request (also into
 * the editor).
 * @param {any} m the message's record
 */
function payloadSection(m) {
  const pre = h(
    'pre',
    { class: 'payload' },
    m.deadLetter.bodyTruncated ? m.deadLetter.body : pretty(m.deadLetter.body),
  );
  if (!m.deadLetter.bodyTruncated) return h('section', {}, h('h3', {}, 'Payload'), pre);
  const note = h(
    'p',
    { class: 'note', id: 'body-cut' },
    `The first ${fmt(new TextEncoder().encode(m.deadLetter.body).length)} bytes of ${fmt(m.deadLetter.bodyBytes)} are shown.`,
  );
  const load = h('button', { type: 'button', id: 'load-body' }, 'Load the whole body');
  load.addEventListener('click', () => {
    note.textContent = 'reading the DLQ…';
    wholeBody(m)
      .then((text) => {
        pre.replaceChildren(document.createTextNode(displayText(pretty(text), { multiline: true })));
        note.textContent = `The whole body, ${fmt(m.deadLetter.bodyBytes)} bytes.`;
        load.remove();
        const editor = /** @type {HTMLTextAreaElement | null} */ (document.querySelector('#edit-payload'));
        if (editor !== null) {
          editor.value = text;
          editor.disabled = false;
        }
      })
      .catch((error) => {
        note.textContent = error instanceof Error ? error.message : String(error);
      });
  });
  return h('section', {}, h('h3', {}, 'Payload'), note, load, pre);
}

/** @param {URLSearchParams} params */
async function showRecord(params) {
  const m = await api(`/api/message?${params}`);
  m.listing = params.get('listing') ?? '';
  const panel = $('#detail');
  panel.hidden = false;
  $('#detail-title').textContent = displayName(m.id);
  const record = m.deadLetter?.record;
  const error = record?.error;
  const row = m.row;
  const body = $('#detail-body');
  const replayOne = h('button', { type: 'button', class: 'primary' }, 'Replay this message');
  replayOne.addEventListener('click', () => {
    api('/api/replays', { dlq: m.dlq, ids: [m.id] })
      .then(followJob)
      .catch(showError);
  });
  body.replaceChildren(
    h(
      'p',
      { class: 'prediction' },
      h('span', { class: `pill p-${m.prediction}` }, m.prediction),
      ' ',
      m.predictionText,
    ),
    m.deadLetter ? h('div', { class: 'detail-actions' }, replayOne) : '',
    operatorActs(m),
    facts('Dead letter', [
      ['consumer', displayName(m.consumer)],
      ['reason', record?.reason === undefined ? undefined : displayName(record.reason)],
      ['attempts', record?.attempts],
      ['first failure', when(record?.firstFailureAt)],
      ['last failure', when(record?.lastFailureAt)],
      ['dead-lettered', when(record?.deadLetteredAt)],
      [
        'source',
        record?.source
          ? [
              ...new Set(
                [
                  record.source.transport,
                  record.source.destination ?? record.source.exchange,
                  record.source.routingKey,
                ].filter(Boolean),
              ),
            ].join(' ')
          : undefined,
      ],
      ['DLQ position', m.deadLetter?.position],
    ]),
    error
      ? h(
          'section',
          {},
          h('h3', {}, 'Last error'),
          h(
            'pre',
            { class: 'error-text' },
            error.stack && error.stack.startsWith(`${error.name}: `)
              ? error.stack
              : `${error.name}: ${error.message}${error.stack ? `\n${error.stack}` : ''}`,
          ),
        )
      : '',
    m.deadLetter ? payloadSection(m) : '',
    m.deadLetter
      ? h(
          'section',
          {},
          h('h3', {}, 'Headers'),
          h(
            'table',
            { class: 'grid compact' },
            h(
              'tbody',
              {},
              ...Object.entries(m.deadLetter.headers)
                .sort()
                .map(([k, v]) => h('tr', {}, h('th', {}, displayName(k)), h('td', {}, String(v)))),
            ),
          ),
        )
      : '',
    row
      ? facts('Inbox row', [
          ['status', row.status],
          ['attempts', row.attempts],
          ['fingerprint', row.fingerprint],
          ['received', when(row.receivedAt)],
          ['completed', when(row.completedAt)],
          ['dead-lettered', when(row.deadLetteredAt)],
          ['reason', row.deadLetterReason ? displayName(row.deadLetterReason) : undefined],
          ['last error', row.lastError ? `${row.lastError.name}: ${row.lastError.message}` : undefined],
          ['replays', row.replayCount],
          ['expires', when(row.expiresAt)],
        ])
      : h('p', { class: 'note' }, 'No inbox row for this id.'),
    h(
      'section',
      {},
      h('h3', {}, 'Replay history'),
      m.replays.length === 0
        ? h('p', { class: 'note' }, 'never replayed')
        : h(
            'table',
            { class: 'grid compact' },
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                h('th', {}, 'at'),
                h('th', {}, 'by'),
                h('th', {}, 'outcome'),
                h('th', {}, 'replay'),
              ),
            ),
            h(
              'tbody',
              {},
              ...m.replays.map((/** @type {any} */ r) =>
                h(
                  'tr',
                  {},
                  h('td', {}, when(r.at)),
                  h('td', {}, displayName(r.requestedBy ?? '?')),
                  h('td', {}, r.outcome),
                  h('td', {}, r.replayId.slice(0, 8)),
                ),
              ),
            ),
          ),
    ),
  );
}

// -------------------------------------------------------------------------------------------- the page

/** @param {any} overview */
function renderJobs(overview) {
  const body = /** @type {HTMLTableSectionElement} */ ($('#jobs-table tbody'));
  body.replaceChildren(
    ...overview.jobs.map((/** @type {any} */ j) =>
      h(
        'tr',
        {},
        h('td', {}, j.id.slice(0, 8)),
        h('td', {}, displayName(j.requestedBy)),
        h('td', {}, j.dlq),
        h('td', {}, when(j.startedAt)),
        h('td', {}, j.state),
        h('td', { class: 'num' }, j.summary?.replayed ?? '…'),
        h('td', { class: 'num' }, j.summary?.failed ?? '…'),
      ),
    ),
  );
}

/** The operator audit, newest first, of the chosen action. */
async function renderAudit() {
  const action = /** @type {HTMLSelectElement} */ ($('#audit-action')).value;
  const { lines } = await api(`/api/audit${action === '' ? '' : `?action=${encodeURIComponent(action)}`}`);
  const body = /** @type {HTMLTableSectionElement} */ ($('#audit-table tbody'));
  body.replaceChildren(
    ...lines.map((/** @type {any} */ l) =>
      h(
        'tr',
        { 'data-action': l.action },
        h('td', {}, when(l.at)),
        h('td', {}, displayName(l.requestedBy ?? '?')),
        h('td', {}, l.action),
        h('td', {}, displayName(l.consumer)),
        h('td', {}, displayName(l.messageId)),
        h('td', {}, displayText(l.outcome)),
      ),
    ),
  );
}

async function refresh() {
  renderAudit().catch(showError);
  const overview = await api('/api/overview');
  state.overview = overview;
  renderConsumers(overview);
  fillSelectors(overview);
  renderJobs(overview);
  if (overview.samplerError) status(`the inbox could not be read: ${overview.samplerError}`, true);
  else
    status(
      `inbox read at ${new Date(overview.at).toTimeString().slice(0, 8)}; counts every ${overview.sampleIntervalMs / 1000} s`,
    );
}

/** @param {unknown} error */
function showError(error) {
  status(error instanceof Error ? error.message : String(error), true);
}

function wire() {
  $('#filters').addEventListener('submit', (event) => {
    event.preventDefault();
    listDeadLetters().catch(showError);
  });
  $('#lookup').addEventListener('submit', (event) => {
    event.preventDefault();
    const consumer = /** @type {HTMLInputElement} */ ($('#lookup-consumer')).value.trim();
    const id = /** @type {HTMLInputElement} */ ($('#lookup-id')).value.trim();
    if (consumer !== '' && id !== '') showRecord(new URLSearchParams({ consumer, id })).catch(showError);
  });
  $('#select-all').addEventListener('click', () => {
    for (const e of state.listing?.entries ?? []) if (e.id !== undefined) state.selected.add(e.id);
    if (state.listing) renderListing(state.listing);
  });
  $('#select-none').addEventListener('click', () => {
    state.selected.clear();
    if (state.listing) renderListing(state.listing);
  });
  $('#page-prev').addEventListener(
    'click',
    () => void listDeadLetters(Math.max(0, state.offset - PAGE_SIZE)).catch(showError),
  );
  $('#page-next').addEventListener(
    'click',
    () => void listDeadLetters(state.offset + PAGE_SIZE).catch(showError),
  );
  $('#audit-action').addEventListener('change', () => void renderAudit().catch(showError));
  $('#dry-run').addEventListener('click', () => void dryRun().catch(showError));
  $('#replay').addEventListener('click', () => void replay().catch(showError));
  $('#detail-close').addEventListener('click', () => ($('#detail').hidden = true));
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') $('#detail').hidden = true;
  });
}

wire();
refresh()
  .then(() => (state.overview.dlqs.length > 0 ? listDeadLetters() : undefined))
  .catch(showError);
setInterval(() => void refresh().catch(showError), 5_000);

export {};
