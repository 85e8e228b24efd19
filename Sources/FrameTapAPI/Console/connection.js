// Reachability of the server as the page sees it, the "reconnecting…" banner, and the
// back-off every retry loop of the console uses.

import { byId, setText } from './dom.js';

/** Exponential back-off with jitter: 0.5 s, 1 s, 2 s, ... up to `max`, reset after a success. */
export class Backoff {
  constructor({ initial = 500, max = 10_000 } = {}) {
    this.initial = initial;
    this.max = max;
    this.attempt = 0;
  }

  next() {
    const base = Math.min(this.max, this.initial * 2 ** this.attempt);
    this.attempt += 1;
    // Jitter keeps the thumbnails, the list and the event stream of one page (and of many
    // pages) from hitting a server that just came back all in the same instant.
    return Math.round(base * (0.75 + Math.random() * 0.5));
  }

  reset() {
    this.attempt = 0;
  }
}

/** Resolves after `milliseconds`; rejects with an AbortError when `signal` aborts first. */
export function sleep(milliseconds, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason ?? new DOMException('Aborted', 'AbortError'));
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, milliseconds);
    function onAbort() {
      clearTimeout(timer);
      reject(signal.reason ?? new DOMException('Aborted', 'AbortError'));
    }
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export function isAbort(error) {
  return error?.name === 'AbortError';
}

/** Resolves once the page is visible (at once when it already is): hidden tabs fetch nothing. */
export function whenVisible(signal) {
  if (document.visibilityState === 'visible') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onChange = () => {
      if (document.visibilityState !== 'visible') return;
      cleanup();
      resolve();
    };
    const onAbort = () => {
      cleanup();
      reject(signal.reason ?? new DOMException('Aborted', 'AbortError'));
    };
    const cleanup = () => {
      document.removeEventListener('visibilitychange', onChange);
      signal?.removeEventListener('abort', onAbort);
    };
    document.addEventListener('visibilitychange', onChange);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * The page's one opinion on whether the server is reachable, fed by the session list refresh
 * (the heartbeat of the page). Fires `lost` and `restored` on itself; whoever holds a long-lived
 * connection (MJPEG, event stream) listens to `restored` to reconnect at once.
 */
class Connection extends EventTarget {
  constructor() {
    super();
    this.online = true;
    this.countdownTimer = null;
  }

  /** The server did not answer (network error, 502/503/504); the next try is in `retryInMs`. */
  reportDown(message, retryInMs) {
    const wasOnline = this.online;
    this.online = false;
    this.showBanner(message, retryInMs);
    if (wasOnline) this.dispatchEvent(new Event('lost'));
  }

  reportUp() {
    if (this.online) return;
    this.online = true;
    clearInterval(this.countdownTimer);
    const banner = byId('connection-banner');
    banner.hidden = true;
    document.documentElement.dataset.connection = 'online';
    this.dispatchEvent(new Event('restored'));
  }

  showBanner(message, retryInMs) {
    const banner = byId('connection-banner');
    document.documentElement.dataset.connection = 'reconnecting';
    banner.hidden = false;
    clearInterval(this.countdownTimer);
    const retryAt = performance.now() + retryInMs;
    const render = () => {
      const seconds = Math.max(0, Math.ceil((retryAt - performance.now()) / 1000));
      setText(banner, `Reconnecting… ${message} ${seconds > 0 ? `Next try in ${seconds} s.` : 'Trying now.'}`);
    };
    render();
    this.countdownTimer = setInterval(render, 1000);
  }
}

export const connection = new Connection();
