// The session's recent past: a scrubber over what its compressed history holds
// (GET /sessions/{id}/history), showing the picture at the chosen time (frame/at.jpg?t=).
// Each picture is decoded by one of the server's catch-up decoders, so the scrubber asks for one
// picture at a time: the newest position wins, positions passed over while one was on its way
// are never fetched.

import { apiFetch, ApiError, getJSON, sessionPath } from './api.js';
import { isAbort, sleep } from './connection.js';
import { h, setText } from './dom.js';
import { formatBytes, formatCount } from './format.js';

/** How often the held range is asked for while the view is open. */
const RANGE_INTERVAL_MS = 2000;
/** Width of the pictures shown (the server scales them; one JPEG per position). */
const PICTURE_WIDTH = 480;

export class HistoryScrubber {
  constructor(id) {
    this.id = id;
    this.range = null;
    this.wanted = null;  // the time (ms since 1970) the slider points at
    this.shown = null;   // the time of the picture on screen
    this.shownCaption = null;  // what the caption says of it
    this.loading = false;
    this.objectURL = null;
    this.controller = new AbortController();

    this.summary = h('p', { class: 'help history-summary', id: 'history-summary' }, 'Looking at what the session holds…');
    this.slider = h('input', {
      type: 'range', id: 'history-scrubber', min: '0', max: '0', step: '1', value: '0', disabled: true,
      'aria-describedby': 'history-summary history-caption',
    });
    this.newestButton = h('button', { type: 'button', id: 'history-newest', disabled: true }, 'Newest');
    this.picture = h('img', { class: 'history-picture', id: 'history-picture', alt: `A picture from the recent past of ${id}`, hidden: true });
    this.caption = h('p', { class: 'history-caption', id: 'history-caption', 'aria-live': 'polite' });
    this.element = h('div', { class: 'history' },
      this.summary,
      h('div', { class: 'history-controls' },
        h('label', { for: 'history-scrubber' }, 'Time'), this.slider, this.newestButton),
      h('div', { class: 'history-holder' }, this.picture),
      this.caption);

    this.slider.addEventListener('input', () => this.seek(Number(this.slider.value)));
    this.newestButton.addEventListener('click', () => {
      if (!this.range) return;
      this.slider.value = this.slider.max;
      this.seek(Number(this.slider.max));
    });
    this.rangeLoop(this.controller.signal);
  }

  close() {
    this.controller.abort();
    if (this.objectURL) URL.revokeObjectURL(this.objectURL);
    this.objectURL = null;
  }

  async rangeLoop(signal) {
    while (!signal.aborted) {
      try {
        this.showRange(await getJSON(sessionPath(this.id, '/history'), { signal }));
      } catch (error) {
        if (isAbort(error)) return;
        if (!(error instanceof ApiError && error.code === 'session_not_found')) {
          setText(this.summary, `The history cannot be read: ${error.message}`);
        }
      }
      await sleep(RANGE_INTERVAL_MS, signal).catch(() => {});
    }
  }

  showRange(history) {
    const from = history.from ? Date.parse(history.from) : NaN;
    const to = history.to ? Date.parse(history.to) : NaN;
    if (!Number.isFinite(from) || !Number.isFinite(to)) {
      this.range = null;
      this.slider.disabled = true;
      this.newestButton.disabled = true;
      setText(this.summary, 'Nothing held yet: the history fills as the stream arrives.');
      return;
    }
    // Follow the newest end while the slider sits there; otherwise keep the time chosen.
    const atNewest = !this.range || Number(this.slider.value) >= Number(this.slider.max);
    this.range = { from, to };
    this.slider.min = '0';
    this.slider.max = String(Math.max(0, to - from));
    this.slider.disabled = false;
    this.newestButton.disabled = false;
    const position = atNewest ? to : Math.min(Math.max(this.wanted ?? to, from), to);
    this.slider.value = String(position - from);
    setText(this.summary,
      `${((to - from) / 1000).toFixed(1)} s held: ${formatCount(history.gops)} GOPs, ${formatCount(history.accessUnits)} access units, `
      + `${formatBytes(history.bytes)} (pictures ${history.firstSeq ?? '—'} to ${history.lastSeq ?? '—'}; `
      + `at most ${history.limits?.seconds ?? '?'} s and ${formatBytes(history.limits?.bytes ?? 0)}).`);
    // No picture yet, or the last one asked for at the newest end was not had (the stream moved
    // on, or it was cut there): ask again at the newest end.
    if (this.shown === null || (atNewest && !this.loading && this.shownCaption === null)) {
      this.seek(position - from);
    } else if (atNewest && !this.loading && this.shownCaption && this.shown < to - 1000) {
      // Each picture from the past is a decode from its keyframe, so the newest is not fetched
      // again on its own: the caption says a newer one is there (the live view above shows it).
      setText(this.caption, `${this.shownCaption}. Newer pictures have come since: Newest shows the latest held.`);
    }
  }

  /** Shows the picture at `offset` ms into the held range, once nothing else is on its way. */
  seek(offset) {
    if (!this.range) return;
    this.wanted = this.range.from + offset;
    if (!this.loading) this.fetchWanted(this.controller.signal);
  }

  async fetchWanted(signal) {
    this.loading = true;
    try {
      while (this.wanted !== null && this.wanted !== this.shown && !signal.aborted) {
        const time = Math.round(this.wanted);
        try {
          const response = await apiFetch(
            sessionPath(this.id, `/frame/at.jpg?t=${time}&width=${PICTURE_WIDTH}`), { signal });
          const blob = await response.blob();
          if (this.objectURL) URL.revokeObjectURL(this.objectURL);
          this.objectURL = URL.createObjectURL(blob);
          this.picture.src = this.objectURL;
          this.picture.hidden = false;
          const received = response.headers.get('X-Frame-Received-At');
          this.shownCaption = `Picture #${response.headers.get('X-Frame-Seq') ?? '?'}`
            + (received ? `, received ${new Date(received).toLocaleTimeString()}` : '');
          setText(this.caption, this.shownCaption);
          this.shown = time;
        } catch (error) {
          if (isAbort(error)) return;
          this.shown = time;
          this.shownCaption = null;
          if (error instanceof ApiError && error.code === 'catchup_queue_full') {
            setText(this.caption, 'The server is busy decoding; trying again shortly.');
            this.shown = null;
            await sleep(1000, signal).catch(() => {});
          } else if (error instanceof ApiError && error.code === 'not_in_history') {
            // The range on screen may be up to RANGE_INTERVAL_MS old, and the oldest moments go as
            // the stream moves on: a time before what is held now shows the oldest held instead.
            const held = await getJSON(sessionPath(this.id, '/history'), { signal }).catch(() => null);
            const from = held?.from ? Date.parse(held.from) : NaN;
            if (Number.isFinite(from) && time < from && this.wanted === time) {
              this.wanted = from;
              this.shown = null;
              continue;
            }
            setText(this.caption, 'That moment is no longer held.');
          } else {
            setText(this.caption, `No picture: ${error.message}`);
          }
        }
      }
    } finally {
      this.loading = false;
    }
  }
}
