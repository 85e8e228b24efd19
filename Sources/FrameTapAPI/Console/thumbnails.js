// Live thumbnails by long poll: GET latest.jpg?width=&wait=5000&after=<seq> answers at once
// when a newer picture exists and otherwise holds the request until one does (304 when the wait
// ends, 404 no_frame_yet when it ends before the session's first picture). Each answer becomes a
// blob: URL for the card's <img>.

import { apiFetch, ApiError, sessionPath } from './api.js';
import { signInRequired } from './auth.js';
import { Backoff, isAbort, sleep, whenVisible } from './connection.js';

/** The longest wait the console asks for; the server caps it at 30 s. */
const LONG_POLL_MS = 5000;
/** With more feeds than slots, polls wait less so every card gets its turn. */
const SHARED_POLL_MS = 1500;
/**
 * At most this many thumbnail requests at once for the whole page. Browsers allow six HTTP/1.1
 * connections per host; the event stream, the list refresh, an MJPEG view and an upload need
 * theirs, and a grid of long polls must never starve them.
 */
const MAX_CONCURRENT_POLLS = 3;
/** A stream decoding 25 or 60 pictures a second does not need a 320 px thumbnail per picture. */
const MIN_INTERVAL_MS = 250;
const CROWDED_INTERVAL_MS = 1000;

class Slots {
  constructor(count) {
    this.free = count;
    this.count = count;
    this.waiting = [];
    this.feeds = 0;
  }

  get crowded() {
    return this.feeds > this.count;
  }

  acquire(signal) {
    if (signal.aborted) return Promise.reject(signal.reason ?? new DOMException('Aborted', 'AbortError'));
    if (this.free > 0) {
      this.free -= 1;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const index = this.waiting.indexOf(waiter);
        if (index >= 0) this.waiting.splice(index, 1);
        reject(signal.reason ?? new DOMException('Aborted', 'AbortError'));
      };
      const waiter = {
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      this.waiting.push(waiter);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  release() {
    const next = this.waiting.shift();
    if (next) next.grant();
    else this.free += 1;
  }
}

const slots = new Slots(MAX_CONCURRENT_POLLS);

/**
 * Keeps `img` showing the session's newest picture while started. `maxWidth` is the thumbnail
 * width asked for; `sourceWidth()` may tell the picture's own width, since the server refuses
 * to enlarge past twice the picture (400), and a small picture is better sent as it is.
 * `latestSeq()` may tell the newest sequence the page knows from the session's status.
 * `waitForSession` keeps asking while the session does not exist yet (an upload about to make it).
 */
export class ThumbnailFeed {
  constructor(sessionId, img, {
    maxWidth = 320, sourceWidth = () => null, latestSeq = () => null, onPicture = () => {}, onGone = () => {},
    waitForSession = false,
  } = {}) {
    this.waitForSession = waitForSession;
    this.sessionId = sessionId;
    this.img = img;
    this.maxWidth = maxWidth;
    this.sourceWidth = sourceWidth;
    this.latestSeq = latestSeq;
    this.onPicture = onPicture;
    this.onGone = onGone;
    this.seq = 0;
    this.controller = null;
    this.objectURL = null;
    this.allowWidth = true;
  }

  get running() {
    return this.controller !== null;
  }

  start() {
    if (this.controller) return;
    this.controller = new AbortController();
    slots.feeds += 1;
    this.run(this.controller.signal).catch((error) => {
      if (!isAbort(error)) console.error('thumbnail feed stopped', error);
    });
  }

  stop() {
    if (!this.controller) return;
    this.controller.abort();
    this.controller = null;
    slots.feeds -= 1;
  }

  /** Stops and frees the last picture's blob. */
  dispose() {
    this.stop();
    if (this.objectURL) URL.revokeObjectURL(this.objectURL);
    this.objectURL = null;
  }

  url(wait) {
    // A session deleted and pushed again under the same id counts from 1 again.
    const latest = this.latestSeq();
    if (Number.isFinite(latest) && latest < this.seq) this.seq = 0;
    const query = new URLSearchParams();
    const source = this.sourceWidth();
    const width = Number.isFinite(source) && source > 0 ? Math.min(this.maxWidth, source) : this.maxWidth;
    if (this.allowWidth) query.set('width', String(width));
    query.set('wait', String(wait));
    query.set('after', String(this.seq));
    return sessionPath(this.sessionId, `/frame/latest.jpg?${query}`);
  }

  async run(signal) {
    const backoff = new Backoff();
    for (;;) {
      await whenVisible(signal);
      // With more feeds than slots, a session the page's status says has nothing newer than
      // this card waits without a slot, so that idle sessions' long polls never hold back the
      // live ones.
      if (slots.crowded && this.latestSeq() === this.seq) {
        await sleep(CROWDED_INTERVAL_MS, signal);
        continue;
      }
      await slots.acquire(signal);
      const started = performance.now();
      let response;
      try {
        response = await apiFetch(this.url(slots.crowded ? SHARED_POLL_MS : LONG_POLL_MS), { signal, allow: [404] });
        if (response.status === 200) await this.show(response);
      } catch (error) {
        slots.release();
        if (isAbort(error)) throw error;
        await this.handleFailure(error, backoff, signal);
        continue;
      }
      slots.release();
      backoff.reset();
      if (response.status === 404) {
        const problem = await response.json().catch(() => ({}));
        if (problem.code === 'session_not_found' && !this.waitForSession) {
          this.stop();
          this.onGone();
          return;
        }
        await sleep(this.waitForSession ? 300 : 1000, signal);  // not there yet: be patient
      } else if (response.status === 200) {
        const interval = slots.crowded ? CROWDED_INTERVAL_MS : MIN_INTERVAL_MS;
        await sleep(Math.max(0, started + interval - performance.now()), signal);
      }
      // 304: the wait ended with nothing new; ask again at once.
    }
  }

  async handleFailure(error, backoff, signal) {
    if (error instanceof ApiError && error.status === 401) {
      await signInRequired();
    } else if (error instanceof ApiError && error.status === 400 && this.allowWidth) {
      this.allowWidth = false;  // an unusual picture size the width cannot serve: take it as it is
    } else {
      await sleep(backoff.next(), signal);
    }
  }

  async show(response) {
    const seq = Number(response.headers.get('X-Frame-Seq'));
    const blob = await response.blob();
    if (Number.isFinite(seq) && seq > 0) this.seq = seq;
    const previous = this.objectURL;
    this.objectURL = URL.createObjectURL(blob);
    this.img.src = this.objectURL;
    // The old picture stays on screen until the new one decoded; only then is its blob freed.
    if (previous) this.img.decode().catch(() => {}).finally(() => URL.revokeObjectURL(previous));
    this.onPicture({
      seq: this.seq,
      ageMs: Number(response.headers.get('X-Frame-Age-Ms')),
      width: Number(response.headers.get('X-Frame-Width')),
      height: Number(response.headers.get('X-Frame-Height')),
    });
  }
}
