// Keeps the session store in step with the server: the session list at start, on every
// (re)opened event stream and on `resync`; events as they come; and a list refresh every 2 s,
// which is both the fallback when the server has no /events and the source of the counters
// (fps, bit rate, picture age), which no event carries.

import { api, ApiError } from './api.js';
import { isSigningIn, signInRequired } from './auth.js';
import { Backoff, connection, isAbort, sleep } from './connection.js';
import { EventStream, restartOnAuthChange } from './events.js';
import { notify } from './notices.js';

const REFRESH_INTERVAL_MS = 2000;

export class SessionSync extends EventTarget {
  constructor(store) {
    super();
    this.store = store;
    this.events = new EventStream();
    this.backoff = new Backoff();
    this.wake = null;
    this.mode = 'starting';
    restartOnAuthChange(this.events);
    this.events.addEventListener('event', (event) => this.applyEvent(event.detail));
    this.events.addEventListener('open', () => this.refreshNow());
    this.events.addEventListener('statechange', () => this.updateMode());
    connection.addEventListener('lost', () => this.updateMode());
    connection.addEventListener('restored', () => this.updateMode());
  }

  start() {
    this.events.start();
    this.refreshLoop();
  }

  /** Fetches the list now instead of at the next tick (after an upload started, an event gap, ...). */
  refreshNow() {
    this.wake?.();
  }

  async refreshLoop() {
    for (;;) {
      const requestedAt = performance.now();
      let delay = REFRESH_INTERVAL_MS;
      try {
        const statuses = await api.listSessions();
        this.store.applyList(statuses, requestedAt);
        this.backoff.reset();
        connection.reportUp();
      } catch (error) {
        if (error instanceof ApiError && error.status === 401) {
          await signInRequired();
          continue;
        }
        if (error instanceof ApiError && error.isTransient) {
          delay = this.backoff.next();
          connection.reportDown(error.status ? error.message : 'The server cannot be reached.', delay);
        } else {
          notify(`Could not refresh the sessions: ${error.message}`, { kind: 'error', key: 'refresh' });
        }
      }
      await this.pause(delay);
    }
  }

  /** Sleeps until the next refresh, or until refreshNow() is called. */
  pause(milliseconds) {
    const controller = new AbortController();
    this.wake = () => controller.abort();
    return sleep(milliseconds, controller.signal).catch((error) => {
      if (!isAbort(error)) throw error;
    }).finally(() => {
      this.wake = null;
    });
  }

  /** The contract's events, onto the store. Counters come with the next list refresh. */
  applyEvent({ type, data }) {
    if (type === 'resync') {
      this.refreshNow();
      return;
    }
    // The configuration file: a reading refused stays on screen until one is applied.
    if (type === 'config.rejected') {
      notify(`The configuration file was not reloaded (the running one stays): ${data?.message ?? 'see the server log'}`,
        { kind: 'error', key: 'configuration', timeout: 0 });
      return;
    }
    if (type === 'config.applied') {
      if (data?.reason !== 'start') notify('The configuration file was reloaded.', { key: 'configuration' });
      return;
    }
    const id = data?.session;
    if (typeof id !== 'string') return;
    const store = this.store;
    if (type !== 'session.created' && type !== 'session.removed' && !store.has(id)) {
      // News of a session this page has not seen yet: ask for it (404 if it is already gone).
      this.refreshSession(id);
      return;
    }
    switch (type) {
      case 'events.dropped':
        // Some of its events never came: its state is whatever the server says now.
        this.refreshSessionSoon(id);
        break;
      case 'session.created':
        store.patch(id, { backend: data.backend ?? null, decode: data.decode ?? null }, { create: true });
        this.refreshSession(id);
        break;
      case 'session.removed':
        store.remove(id, { reason: data.reason ?? 'gone', fromEvent: true });
        break;
      case 'picture.first': {
        const entry = store.get(id);
        if (!entry.status.latestFrame) {
          entry.notePicture(0);  // decoded just now; the next status brings its exact age
          store.patch(id, { latestFrame: { seq: data.seq, width: data.width, height: data.height } });
        }
        break;
      }
      case 'format.changed':
        store.patch(id, { format: data.format ?? null });
        break;
      case 'backend.selected':
        store.patch(id, { backend: data.backend, backendReason: data.reason ?? null, backendFallback: Boolean(data.fallback) });
        break;
      case 'session.error':
        store.patch(id, { lastError: { code: data.code, message: data.message, at: data.at } });
        break;
      case 'upload.started':
        store.patch(id, { uploading: true });
        break;
      case 'upload.ended':
        store.patch(id, { uploading: false });
        break;
      case 'viewers.changed':
        store.patch(id, { subscribers: data.viewers, waiting: data.waiting });
        break;
      case 'source.connected': {
        const source = store.get(id).status.source;
        if (source) store.patch(id, { source: { ...source, state: 'live', connectedAt: data.at, failures: 0, nextAttemptAt: null } });
        break;
      }
      case 'source.lost': {
        // The next status brings when it tries again; the error is the session's last one too.
        const error = { code: data.code, message: data.message, at: data.at };
        const source = store.get(id).status.source;
        store.patch(id, {
          lastError: error,
          ...(source ? { source: { ...source, state: 'retrying', lastError: error, connectedAt: null } } : {}),
        });
        this.refreshSession(id);
        break;
      }
      default:
        break;
    }
  }

  /** GET /sessions/{id} for a session an event just told us about. */
  /**
   * refreshSession at most once per two seconds for a session, the last call's included: a
   * flooding session announces its dropped events as often as its budget lets it.
   */
  refreshSessionSoon(id) {
    this.pendingRefreshes ??= new Map();
    if (this.pendingRefreshes.has(id)) return;
    this.pendingRefreshes.set(id, setTimeout(() => {
      this.pendingRefreshes.delete(id);
      this.refreshSession(id);
    }, 2000));
  }

  async refreshSession(id) {
    try {
      this.store.applyStatus(await api.session(id));
    } catch (error) {
      if (error instanceof ApiError && error.code === 'session_not_found') this.store.remove(id, { reason: 'gone' });
      // Anything else: the next list refresh catches up.
    }
  }

  updateMode() {
    let mode;
    if (!connection.online) mode = 'reconnecting';
    else if (isSigningIn()) mode = 'signing-in';
    else if (this.events.state === 'open') mode = 'events';
    else if (this.events.state === 'unavailable') mode = 'polling';
    else mode = 'connecting';
    if (mode === this.mode) return;
    this.mode = mode;
    this.dispatchEvent(new Event('modechange'));
  }
}
