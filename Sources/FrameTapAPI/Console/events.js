// The server's event stream (GET /events, server-sent events). EventSource resumes by itself
// with Last-Event-ID after a dropped connection; this module handles what it cannot: a server
// without /events (404: the page falls back to polling), a 401 (sign in, then reconnect), and a
// stream the browser gave up on (reconnect with back-off; a new EventSource cannot resume, so
// the owner refetches the session list on every open).

import { authEvents, signInRequired, withAccessToken, authHeaders } from './auth.js';
import { Backoff, isAbort, sleep } from './connection.js';

export const EVENT_TYPES = [
  'session.created', 'session.removed', 'picture.first', 'format.changed', 'backend.selected', 'session.error',
  'upload.started', 'upload.ended', 'viewers.changed', 'events.dropped', 'resync', 'config.applied', 'config.rejected',
];

/** How often a page without /events asks again (the server may have been upgraded meanwhile). */
const UNAVAILABLE_RETRY_MS = 60_000;
/** A probe whose headers take longer than this is taken as "the stream exists" (it only waits for data). */
const PROBE_TIMEOUT_MS = 5_000;

export class EventStream extends EventTarget {
  /**
   * Fires `event` (detail: {type, data, id}), `open` (detail: {reopened}), `unavailable`
   * (no /events on this server) and `interrupted` (the connection dropped; retrying).
   */
  constructor(path = '/events') {
    super();
    this.path = path;
    this.source = null;
    this.backoff = new Backoff({ initial: 1000, max: 30_000 });
    this.controller = null;
    this.openedOnce = false;
    this.state = 'idle';
  }

  start() {
    if (this.controller) return;
    this.controller = new AbortController();
    this.connect();
  }

  stop() {
    this.controller?.abort();
    this.controller = null;
    this.source?.close();
    this.source = null;
    this.state = 'idle';
  }

  /** A fresh connection now (after sign-in or sign-out: the URL carries the token). */
  restart() {
    this.stop();
    this.start();
  }

  connect() {
    const signal = this.controller?.signal;
    if (!signal || signal.aborted) return;
    this.source?.close();
    const source = new EventSource(withAccessToken(this.path));
    this.source = source;
    this.setState('connecting');
    source.addEventListener('open', () => {
      this.backoff.reset();
      this.setState('open');
      this.dispatchEvent(new CustomEvent('open', { detail: { reopened: this.openedOnce } }));
      this.openedOnce = true;
    });
    for (const type of EVENT_TYPES) {
      source.addEventListener(type, (event) => this.deliver(type, event));
    }
    source.addEventListener('error', () => {
      if (source.readyState === EventSource.CLOSED) {
        this.recover(source);
      } else {
        this.setState('interrupted');  // the browser reconnects by itself, sending Last-Event-ID
      }
    });
  }

  deliver(type, event) {
    let data = null;
    try {
      data = JSON.parse(event.data);
    } catch {
      return;  // not the contract's one line of JSON: nothing we could act on
    }
    this.dispatchEvent(new CustomEvent('event', { detail: { type, data, id: event.lastEventId } }));
  }

  /** The browser closed the stream for good (a non-200 answer, or the wrong type): find out why. */
  async recover(source) {
    source.close();
    if (this.source === source) this.source = null;
    const signal = this.controller?.signal;
    if (!signal || signal.aborted) return;
    try {
      const status = await this.probe(signal);
      if (status === 404) {
        this.setState('unavailable');
        await sleep(UNAVAILABLE_RETRY_MS, signal);
      } else if (status === 401) {
        this.setState('signing-in');
        await signInRequired();
      } else {
        this.setState('interrupted');
        await sleep(this.backoff.next(), signal);
      }
      // A sign-in restarts the stream itself (restartOnAuthChange): this attempt is then over.
      if (!signal.aborted) this.connect();
    } catch (error) {
      if (!isAbort(error)) throw error;
    }
  }

  /** The status GET /events answers now (0: no answer). Only the headers are read. */
  async probe(signal) {
    const controller = new AbortController();
    const abort = () => controller.abort();
    signal.addEventListener('abort', abort, { once: true });
    const timer = setTimeout(abort, PROBE_TIMEOUT_MS);
    try {
      const response = await fetch(this.path, { headers: authHeaders(), cache: 'no-store', signal: controller.signal });
      return response.status;
    } catch (error) {
      if (signal.aborted) throw error;
      return controller.signal.aborted ? 200 : 0;
    } finally {
      clearTimeout(timer);
      controller.abort();  // a 200 is an endless stream: its headers were all we wanted
      signal.removeEventListener('abort', abort);
    }
  }

  setState(state) {
    if (this.state === state) return;
    this.state = state;
    if (state === 'unavailable') this.dispatchEvent(new Event('unavailable'));
    if (state === 'interrupted') this.dispatchEvent(new Event('interrupted'));
    this.dispatchEvent(new Event('statechange'));
  }
}

// A token change makes every open stream's URL stale.
export function restartOnAuthChange(stream) {
  authEvents.addEventListener('signed-in', () => stream.restart());
  authEvents.addEventListener('signed-out', () => stream.restart());
}
