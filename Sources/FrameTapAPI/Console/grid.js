// The sessions grid: one card per session with its live thumbnail and vital signs. Cards are
// links (#/sessions/ID), so Tab reaches them, Enter opens them and Back returns; the arrow keys
// move between cards.

import { byId, h, setText } from './dom.js';
import { formatAge, formatBitRate, formatFps, formatSummary } from './format.js';
import { pullBadge, recoveredFrom, sourceProblem } from './source.js';
import { showStanding } from './standing.js';
import { ThumbnailFeed } from './thumbnails.js';

const THUMBNAIL_WIDTH = 320;

class SessionCard {
  constructor(entry, store) {
    const id = entry.id;
    this.id = id;
    this.store = store;
    this.img = h('img', { class: 'thumb-img', alt: `Latest picture of ${id}`, hidden: true, decoding: 'async' });
    this.placeholder = h('span', { class: 'thumb-placeholder' }, 'Waiting for the first picture…');
    this.format = h('dd', { dataset: { field: 'format' } });
    this.fps = h('dd', { dataset: { field: 'fps' } });
    this.bitRate = h('dd', { dataset: { field: 'bitrate' } });
    this.age = h('dd', { dataset: { field: 'age' } });
    this.viewers = h('dd', { dataset: { field: 'viewers' } });
    this.backend = h('span', { class: 'badge badge-backend' });
    this.standing = h('span', { class: 'badge badge-standing', hidden: true });
    this.uploading = h('span', { class: 'badge badge-live', hidden: true }, 'receiving');
    // A pull session's state (live, connecting, retrying, failed) and, while it is not live, why.
    this.pull = h('span', { class: 'badge badge-pull', hidden: true, dataset: { field: 'pull' } });
    this.error = h('span', { class: 'badge badge-error', hidden: true, dataset: { field: 'error' } });
    this.problem = h('p', { class: 'card-problem', hidden: true, dataset: { field: 'problem' } });
    const titleId = `card-title-${cssSafe(id)}`;
    const statsId = `card-stats-${cssSafe(id)}`;
    this.link = h('a', {
      class: 'card-link', href: `#/sessions/${encodeURIComponent(id)}`, 'aria-labelledby': titleId, 'aria-describedby': statsId,
    },
      h('div', { class: 'thumb' }, this.img, this.placeholder),
      h('div', { class: 'card-body' },
        h('h2', { class: 'card-title', id: titleId }, id),
        h('div', { class: 'badges' }, this.backend, this.standing, this.pull, this.uploading, this.error),
        this.problem,
        h('dl', { class: 'stats', id: statsId },
          h('div', { class: 'stat-wide' }, h('dt', {}, 'Format'), this.format),
          h('div', {}, h('dt', {}, 'Rate'), this.fps),
          h('div', {}, h('dt', {}, 'Bit rate'), this.bitRate),
          h('div', {}, h('dt', {}, 'Last picture'), this.age),
          h('div', {}, h('dt', {}, 'Viewers'), this.viewers))));
    this.element = h('li', { class: 'card', dataset: { session: id } }, this.link);
    this.feed = new ThumbnailFeed(id, this.img, {
      maxWidth: THUMBNAIL_WIDTH,
      sourceWidth: () => this.store.get(id)?.status.format?.width ?? null,
      latestSeq: () => this.store.get(id)?.status.latestFrame?.seq ?? null,
      onPicture: (picture) => this.showPicture(picture),
    });
    this.update(entry);
  }

  showPicture({ seq, ageMs }) {
    this.img.hidden = false;
    this.placeholder.hidden = true;
    this.element.dataset.seq = String(seq);
    const entry = this.store.get(this.id);
    if (entry) {
      entry.notePicture(ageMs);
      this.updateAge(entry);
    }
  }

  update(entry) {
    const status = entry.status;
    setText(this.format, formatSummary(status.format, status.codec));
    setText(this.fps, formatFps(entry.fps));
    setText(this.bitRate, formatBitRate(entry.bitsPerSecond));
    setText(this.viewers, String(status.subscribers ?? 0));
    this.element.dataset.fps = entry.fps === null ? '' : entry.fps.toFixed(2);
    this.element.dataset.resolution = status.format ? `${status.format.width}x${status.format.height}` : '';
    this.element.dataset.codec = status.codec ?? '';
    this.element.dataset.bitDepth = status.format?.bitDepth ?? '';
    setText(this.backend, status.backend ?? 'starting');
    this.backend.title = status.backendReason ?? '';
    showStanding(this.standing, status);
    this.element.dataset.origin = status.origin ?? '';
    this.uploading.hidden = !status.uploading;
    this.updateSource(status.source ?? null);
    // A pull live again on a connection made after its last error shows no error badge.
    const error = recoveredFrom(status.lastError, status.source) ? null : status.lastError;
    this.error.hidden = !error;
    if (error) {
      setText(this.error, `error: ${error.code}`);
      this.error.title = error.message ?? '';
    }
    this.updateAge(entry);
  }

  updateSource(source, now = Date.now()) {
    const badge = pullBadge(source);
    this.element.dataset.pull = source?.state ?? '';
    this.pull.hidden = !badge;
    if (badge) {
      setText(this.pull, badge.text);
      this.pull.className = `badge badge-pull badge-${badge.kind}`;
      this.pull.title = source.url ?? '';
    }
    const problem = sourceProblem(source, now);
    this.problem.hidden = !problem;
    if (problem) setText(this.problem, problem);
    setText(this.placeholder, source && source.state === 'idle'
      ? 'Connects when a picture is asked for.'
      : source && source.state !== 'live'
        ? (source.lastError ? 'No picture: the source is not live.' : 'Connecting to the source…')
        : 'Waiting for the first picture…');
  }

  updateAge(entry, now = performance.now()) {
    const age = entry.pictureAge(now);
    setText(this.age, age === null ? 'none yet' : `${formatAge(age)} ago`);
  }

  /** Once a second: the picture's age, and a waiting pull's count-down to its next try. */
  tick(entry, now) {
    this.updateAge(entry, now);
    if (entry.status.source?.state === 'retrying') this.updateSource(entry.status.source);
  }

  dispose() {
    this.feed.dispose();
    this.element.remove();
  }
}

/** An id usable inside an element id attribute (ids may hold '.', '~'). */
function cssSafe(id) {
  return id.replace(/[^A-Za-z0-9_-]/g, (character) => `_${character.charCodeAt(0).toString(16)}`);
}

export class SessionGrid {
  constructor(store) {
    this.store = store;
    this.list = byId('session-grid');
    this.empty = byId('empty-state');
    this.loading = byId('grid-loading');
    this.cards = new Map();
    this.visible = false;
    this.ageTimer = null;
    store.addEventListener('change', (event) => this.onChange(event.detail));
    this.list.addEventListener('keydown', (event) => this.onKeyDown(event));
    for (const command of document.querySelectorAll('[data-origin-command]')) {
      command.textContent = command.textContent.replaceAll('ORIGIN', location.origin);
    }
  }

  show() {
    this.visible = true;
    for (const card of this.cards.values()) card.feed.start();
    clearInterval(this.ageTimer);
    this.ageTimer = setInterval(() => this.tick(), 1000);
  }

  /** Hidden grids poll nothing: the session view has the MJPEG stream instead. */
  hide() {
    this.visible = false;
    for (const card of this.cards.values()) card.feed.stop();
    clearInterval(this.ageTimer);
  }

  focusCard(id) {
    this.cards.get(id)?.link.focus();
  }

  tick() {
    const now = performance.now();
    for (const card of this.cards.values()) {
      const entry = this.store.get(card.id);
      if (entry) card.tick(entry, now);
    }
  }

  onChange({ kind, id }) {
    if (kind === 'added') this.add(id);
    else if (kind === 'updated') {
      const entry = this.store.get(id);
      if (entry) this.cards.get(id)?.update(entry);
    } else if (kind === 'removed') this.remove(id);
    this.updateEmptyState();
  }

  add(id) {
    if (this.cards.has(id)) return;
    const entry = this.store.get(id);
    if (!entry) return;
    const card = new SessionCard(entry, this.store);
    this.cards.set(id, card);
    // Keep the cards in id order without re-rendering the others (their pictures stay).
    const next = [...this.cards.keys()].filter((other) => other.localeCompare(id, 'en') > 0)
      .sort((a, b) => a.localeCompare(b, 'en'))[0];
    this.list.insertBefore(card.element, next ? this.cards.get(next).element : null);
    if (this.visible) card.feed.start();
  }

  remove(id) {
    const card = this.cards.get(id);
    if (!card) return;
    const hadFocus = card.element.contains(document.activeElement);
    const neighbour = card.element.nextElementSibling ?? card.element.previousElementSibling;
    card.dispose();
    this.cards.delete(id);
    if (hadFocus) (neighbour?.querySelector('a') ?? byId('sessions-heading')).focus();
  }

  updateEmptyState() {
    this.loading.hidden = this.store.loaded;
    this.empty.hidden = !this.store.loaded || this.cards.size > 0;
    this.list.hidden = this.cards.size === 0;
  }

  /** Arrow keys move between cards: left/right by one, up/down by one row of the grid. */
  onKeyDown(event) {
    if (!['ArrowLeft', 'ArrowRight', 'ArrowUp', 'ArrowDown', 'Home', 'End'].includes(event.key)) return;
    const links = [...this.list.querySelectorAll('.card-link')];
    const index = links.indexOf(document.activeElement);
    if (index < 0) return;
    const top = links[0].getBoundingClientRect().top;
    const perRow = Math.max(1, links.filter((link) => Math.abs(link.getBoundingClientRect().top - top) < 2).length);
    const target = {
      ArrowLeft: index - 1, ArrowRight: index + 1, ArrowUp: index - perRow, ArrowDown: index + perRow,
      Home: 0, End: links.length - 1,
    }[event.key];
    if (target >= 0 && target < links.length) {
      event.preventDefault();
      links[target].focus();
    }
  }
}
