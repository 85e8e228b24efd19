// GET /system: what the instance is, its limits and its hardware. The hardware part is drawn
// generically (lists of objects become tables, objects become fact lists), so device kinds the
// server adds later (CUDA devices, per-device session counts) show up without a console change.

import { api, ApiError } from './api.js';
import { signInRequired } from './auth.js';
import { byId, definitionList, h, setText } from './dom.js';
import { formatBytes, formatCount, humanizeKey } from './format.js';

const instanceKeys = ['version', 'libavcodec', 'backendDefault', 'decoderThreads', 'vaapiAvailable', 'activeSessions'];

/** A value of the system document as text or nodes; `key` hints at units. */
export function renderValue(value, key = '') {
  if (value === null || value === undefined) return key === 'maxBodyBytes' ? 'unlimited' : '—';
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (typeof value === 'number') {
    if (/bytes$/i.test(key)) return `${formatBytes(value)} (${formatCount(value)} B)`;
    if (/milliseconds$|ms$/i.test(key)) return `${formatCount(value)} ms`;
    if (/seconds$/i.test(key)) return `${formatCount(value)} s`;
    return formatCount(value);
  }
  if (typeof value === 'string') return value === '' ? '—' : value;
  if (Array.isArray(value)) {
    if (value.length === 0) return 'none';
    if (value.every((item) => item === null || typeof item !== 'object')) return value.map((item) => renderValue(item)).join(', ');
    if (value.every((item) => item && typeof item === 'object' && !Array.isArray(item))) return objectTable(value);
    return h('ul', {}, value.map((item) => h('li', {}, renderValue(item))));
  }
  return definitionList(Object.entries(value).map(([name, item]) => [humanizeKey(name), renderValue(item, name)]));
}

/** A table whose columns are every key of every row, in first-seen order. */
function objectTable(rows) {
  const columns = [];
  for (const row of rows) for (const key of Object.keys(row)) if (!columns.includes(key)) columns.push(key);
  return h('div', { class: 'table-scroll' },
    h('table', {},
      h('thead', {}, h('tr', {}, columns.map((column) => h('th', { scope: 'col' }, humanizeKey(column))))),
      h('tbody', {}, rows.map((row) => h('tr', {}, columns.map((column) => h('td', {}, renderValue(row[column], column))))))));
}

export class SystemView {
  constructor(store) {
    this.store = store;
    this.root = byId('system-page');
    this.controller = null;
  }

  async open() {
    this.controller?.abort();
    this.controller = new AbortController();
    const signal = this.controller.signal;
    const heading = h('h1', { tabindex: '-1', class: 'view-title' }, 'System');
    const refresh = h('button', { type: 'button', id: 'system-refresh' }, 'Refresh');
    const body = h('div', { class: 'system-body', 'aria-busy': 'true' }, h('p', { class: 'help' }, 'Loading…'));
    refresh.addEventListener('click', () => this.open());
    this.root.replaceChildren(h('div', { class: 'view-head' }, heading, refresh), body);
    heading.focus();
    for (;;) {
      try {
        const system = await api.system({ signal });
        body.replaceChildren(...this.sections(system));
        body.setAttribute('aria-busy', 'false');
        return;
      } catch (error) {
        if (error?.name === 'AbortError') return;
        if (error instanceof ApiError && error.status === 401) {
          setText(body, 'Sign in to see this instance.');
          await signInRequired();
          continue;
        }
        body.replaceChildren(h('p', { class: 'error-box', role: 'alert' }, `Could not load /system: ${error.message}`));
        body.setAttribute('aria-busy', 'false');
        return;
      }
    }
  }

  close() {
    this.controller?.abort();
    this.controller = null;
    this.root.replaceChildren();
  }

  sections(system) {
    const section = (title, ...children) => h('section', { class: 'panel' }, h('h2', {}, title), ...children);
    const instance = instanceKeys.filter((key) => key in system).map((key) => [humanizeKey(key), renderValue(system[key], key)]);
    const others = Object.entries(system)
      .filter(([key]) => !instanceKeys.includes(key) && key !== 'limits' && key !== 'hardware')
      .map(([key, value]) => [humanizeKey(key), renderValue(value, key)]);
    const result = [section('Instance', definitionList([...instance, ...others]))];
    if (system.limits) result.push(section('Limits', renderValue(system.limits)));
    if (system.hardware) result.push(section('Hardware', ...this.hardware(system.hardware)));
    result.push(section('Sessions by back end', this.sessionsByBackend()));
    return result;
  }

  /** Device lists (arrays of objects) get a heading and a table each; the rest is a fact list. */
  hardware(hardware) {
    const facts = [];
    const lists = [];
    for (const [key, value] of Object.entries(hardware)) {
      if (Array.isArray(value) && value.some((item) => item && typeof item === 'object')) {
        lists.push(h('h3', {}, `${humanizeKey(key)} (${value.length})`), renderValue(value, key));
      } else if (Array.isArray(value) && value.length === 0) {
        lists.push(h('h3', {}, humanizeKey(key)), h('p', { class: 'help' }, 'none found'));
      } else {
        facts.push([humanizeKey(key), renderValue(value, key)]);
      }
    }
    return [facts.length ? definitionList(facts) : null, ...lists];
  }

  sessionsByBackend() {
    const groups = new Map();
    for (const entry of this.store.list()) {
      const backend = entry.status.backend ?? 'starting';
      if (!groups.has(backend)) groups.set(backend, []);
      groups.get(backend).push(entry.id);
    }
    if (groups.size === 0) return h('p', { class: 'help' }, 'No sessions.');
    return definitionList([...groups.entries()].map(([backend, ids]) => [
      backend,
      h('span', { class: 'session-links' }, ids.flatMap((id, index) => [
        index ? ', ' : null, h('a', { href: `#/sessions/${encodeURIComponent(id)}` }, id)])),
    ]));
  }
}
