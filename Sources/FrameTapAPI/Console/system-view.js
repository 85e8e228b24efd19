// GET /system: what the instance is, its limits and its hardware. Everything but the limits is
// drawn generically (values.js): a member holding an object or a list of objects gets a section
// of its own, nested ones a heading, so device kinds the server adds (CUDA devices, sessions per
// device) show up without a console change.

import { api, ApiError } from './api.js';
import { signInRequired } from './auth.js';
import { byId, definitionList, h, setText } from './dom.js';
import { humanizeKey } from './format.js';
import { isObject, isObjectList, renderValue } from './values.js';

/** Shown first, in this order, when present; other plain members follow them. */
const instanceKeys = ['version', 'libavcodec', 'backendDefault', 'decoderThreads', 'vaapiAvailable', 'activeSessions'];

export class SystemView {
  constructor(store) {
    this.store = store;
    this.root = byId('system-page');
    this.controller = null;
    this.backends = null;
    // The page's session list may arrive after /system (a page opened at #/system) and changes
    // while the view is open: the section follows the store.
    store.addEventListener('change', () => this.renderBackends());
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
    this.backends = null;
    this.root.replaceChildren();
  }

  sections(system) {
    const section = (title, ...children) => h('section', { class: 'panel' }, h('h2', {}, title), ...children);
    const grouped = (key) => key === 'limits' || isObject(system[key]) || isObjectList(system[key]);
    const plainKeys = [
      ...instanceKeys.filter((key) => key in system),
      ...Object.keys(system).filter((key) => !instanceKeys.includes(key) && !grouped(key)),
    ];
    const result = [section('Instance', definitionList(plainKeys.map((key) => [humanizeKey(key), renderValue(system[key], key)])))];
    if (system.limits) result.push(section('Limits', renderValue(system.limits)));
    for (const key of Object.keys(system).filter((name) => name !== 'limits' && grouped(name))) {
      result.push(section(humanizeKey(key), ...this.blocks(system[key], 3)));
    }
    this.backends = h('div', { class: 'sessions-by-backend', id: 'sessions-by-backend' });
    this.backendsKey = null;
    this.renderBackends();
    result.push(section('Sessions by back end', this.backends));
    return result;
  }

  /** Redraws the section when the sessions or their back ends changed (the store changes often). */
  renderBackends() {
    if (!this.backends) return;
    const key = JSON.stringify([this.store.loaded, this.store.list().map((entry) => [entry.id, entry.status.backend])]);
    if (key === this.backendsKey) return;
    this.backendsKey = key;
    this.backends.replaceChildren(this.sessionsByBackend());
  }

  /**
   * An object as a fact list of its plain members, then a heading and a table per list of
   * objects and a heading and the same treatment per nested object; a list as its table.
   */
  blocks(value, level) {
    if (Array.isArray(value)) return [value.length ? renderValue(value) : h('p', { class: 'help' }, 'none')];
    const heading = (text) => h(`h${Math.min(level, 6)}`, {}, text);
    const facts = [];
    const nested = [];
    for (const [key, item] of Object.entries(value)) {
      if (isObjectList(item)) {
        nested.push(heading(`${humanizeKey(key)} (${item.length})`), renderValue(item, key));
      } else if (Array.isArray(item) && item.length === 0 && /s$/.test(key)) {
        nested.push(heading(humanizeKey(key)), h('p', { class: 'help' }, 'none found'));
      } else if (isObject(item)) {
        nested.push(heading(humanizeKey(key)), ...this.blocks(item, level + 1));
      } else {
        facts.push([humanizeKey(key), renderValue(item, key)]);
      }
    }
    return [facts.length ? definitionList(facts) : null, ...nested];
  }

  sessionsByBackend() {
    const groups = new Map();
    for (const entry of this.store.list()) {
      const backend = entry.status.backend ?? 'starting';
      if (!groups.has(backend)) groups.set(backend, []);
      groups.get(backend).push(entry.id);
    }
    if (groups.size === 0) return h('p', { class: 'help' }, this.store.loaded ? 'No sessions.' : 'Loading the sessions…');
    return definitionList([...groups.entries()].map(([backend, ids]) => [
      backend,
      h('span', { class: 'session-links' }, ids.flatMap((id, index) => [
        index ? ', ' : null, h('a', { href: `#/sessions/${encodeURIComponent(id)}` }, id)])),
    ]));
  }
}
