// What the page knows about each session: its latest status (from GET /sessions,
// GET /sessions/{id} and the event stream) and a few minutes of rate samples for the charts.
// Views subscribe to `change` events instead of fetching on their own.

/** How much rate history a session keeps (the session view's charts show all of it). */
export const HISTORY_MS = 5 * 60 * 1000;

/** Rates computed from counters look back at least this far, so one late sample does not spike them. */
const MIN_RATE_SPAN_MS = 1500;
const MAX_RATE_SPAN_MS = 6000;

/** A status with every member the views read, for a session only an event has told us about. */
function emptyStatus(id) {
  return {
    id, backend: null, backendReason: null, decode: null, format: null, counters: {}, latestFrame: null,
    lastError: null, subscribers: 0, uploading: false,
  };
}

class SessionEntry {
  constructor(id) {
    this.id = id;
    this.status = emptyStatus(id);
    /** When `status` was read (performance.now()), to age `latestFrame.ageMs` between reads. */
    this.statusAt = performance.now();
    /** [{t, frames, bytes}] counter readings, oldest first. */
    this.counterSamples = [];
    /** [{t, fps, bps}] for the charts, oldest first. */
    this.rateHistory = [];
    this.fps = null;
    this.bitsPerSecond = null;
    /** Where the rates come from: 'server' (status.rates) or 'counters' (computed here). */
    this.rateSource = null;
    /** When (performance.now()) the newest picture a thumbnail showed was decoded. */
    this.pictureSeenDecodedAt = null;
  }

  /** Milliseconds since the newest picture the page heard of was decoded, now. */
  pictureAge(now = performance.now()) {
    const frame = this.status.latestFrame;
    const fromStatus = frame && Number.isFinite(frame.ageMs) ? this.statusAt - frame.ageMs : null;
    const decodedAt = Math.max(fromStatus ?? -Infinity, this.pictureSeenDecodedAt ?? -Infinity);
    return Number.isFinite(decodedAt) ? Math.max(0, now - decodedAt) : null;
  }

  /** A thumbnail arrived with X-Frame-Age-Ms: fresher than the last status for a live stream. */
  notePicture(ageMs, at = performance.now()) {
    if (!Number.isFinite(ageMs)) return;
    this.pictureSeenDecodedAt = Math.max(this.pictureSeenDecodedAt ?? -Infinity, at - ageMs);
  }

  applyStatus(status, at) {
    this.status = { ...emptyStatus(this.id), ...status };
    this.statusAt = at;
    this.updateRates(status, at);
  }

  updateRates(status, at) {
    const counters = status.counters ?? {};
    if (Number.isFinite(counters.framesDecoded) && Number.isFinite(counters.bytes)) {
      const last = this.counterSamples.at(-1);
      // Counters only grow within one session; smaller ones mean the id now names a new session.
      if (last && (counters.framesDecoded < last.frames || counters.bytes < last.bytes)) {
        this.counterSamples = [];
        this.rateHistory = [];
      }
      this.counterSamples.push({ t: at, frames: counters.framesDecoded, bytes: counters.bytes });
      while (this.counterSamples.length > 2 && at - this.counterSamples[1].t > MAX_RATE_SPAN_MS) this.counterSamples.shift();
    }
    const rates = status.rates;
    if (rates && Number.isFinite(rates.picturesPerSecond) && Number.isFinite(rates.bitsPerSecond)) {
      this.fps = rates.picturesPerSecond;
      this.bitsPerSecond = rates.bitsPerSecond;
      this.rateSource = 'server';
    } else {
      const newest = this.counterSamples.at(-1);
      const base = newest && this.counterSamples.findLast((sample) => newest.t - sample.t >= MIN_RATE_SPAN_MS);
      if (!newest || !base) return;  // not enough history yet: keep what we had
      const seconds = (newest.t - base.t) / 1000;
      this.fps = (newest.frames - base.frames) / seconds;
      this.bitsPerSecond = ((newest.bytes - base.bytes) * 8) / seconds;
      this.rateSource = 'counters';
    }
    this.rateHistory.push({ t: at, fps: this.fps, bps: this.bitsPerSecond });
    while (this.rateHistory.length && at - this.rateHistory[0].t > HISTORY_MS) this.rateHistory.shift();
  }
}

export class SessionStore extends EventTarget {
  constructor() {
    super();
    /** id -> SessionEntry */
    this.entries = new Map();
    /** id -> when an event last added or removed it; a list fetched before that must not undo it. */
    this.eventTouches = new Map();
    this.loaded = false;
  }

  get(id) {
    return this.entries.get(id) ?? null;
  }

  has(id) {
    return this.entries.has(id);
  }

  /** Entries sorted by id. */
  list() {
    return [...this.entries.values()].sort((a, b) => a.id.localeCompare(b.id, 'en'));
  }

  /**
   * A full GET /sessions answer. `requestedAt` is when it was asked for: sessions an event
   * created or removed after that keep what the event said.
   */
  applyList(statuses, requestedAt) {
    const now = performance.now();
    const seen = new Set();
    for (const status of statuses) {
      seen.add(status.id);
      if (!this.entries.has(status.id) && this.touchedSince(status.id, requestedAt)) continue;  // removed meanwhile
      this.applyStatus(status, now);
    }
    for (const id of [...this.entries.keys()]) {
      if (!seen.has(id) && !this.touchedSince(id, requestedAt)) this.remove(id, { reason: 'gone' });
    }
    if (!this.loaded) {
      this.loaded = true;
      this.emit({ kind: 'loaded' });
    }
  }

  /** One session's status (from the list or GET /sessions/{id}). */
  applyStatus(status, at = performance.now()) {
    let entry = this.entries.get(status.id);
    const added = !entry;
    if (added) {
      entry = new SessionEntry(status.id);
      this.entries.set(status.id, entry);
    }
    entry.applyStatus(status, at);
    this.emit({ kind: added ? 'added' : 'updated', id: status.id });
    return entry;
  }

  /**
   * Changes a few members of a session's status (from an event). Only `create` adds a session
   * the page does not know: an event that outlives its session (viewers leaving a deleted one)
   * must not bring its card back. Returns null when nothing was changed.
   */
  patch(id, changes, { create = false } = {}) {
    let entry = this.entries.get(id);
    const added = !entry;
    if (added) {
      if (!create) return null;
      entry = new SessionEntry(id);
      this.entries.set(id, entry);
    }
    this.eventTouches.set(id, performance.now());
    entry.status = { ...entry.status, ...changes };
    this.emit({ kind: added ? 'added' : 'updated', id });
    return entry;
  }

  remove(id, { reason = 'gone', fromEvent = false } = {}) {
    if (fromEvent) this.eventTouches.set(id, performance.now());
    if (!this.entries.delete(id)) return;
    this.emit({ kind: 'removed', id, reason });
  }

  touchedSince(id, time) {
    const touched = this.eventTouches.get(id);
    return touched !== undefined && touched > time;
  }

  emit(detail) {
    this.dispatchEvent(new CustomEvent('change', { detail }));
  }
}
