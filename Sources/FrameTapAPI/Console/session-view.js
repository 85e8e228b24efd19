// One session up close: live MJPEG, the stream's format, a pull session's source (its state,
// why it is not live, a retry), counters with fps and bit-rate charts, the last error, a
// scrubber over its recent past (history.js), a snapshot download (snapshot.js), copy-ready
// commands (commands.js) and delete.

import { api, ApiError, sessionPath } from './api.js';
import { authEvents, signInRequired, withAccessToken } from './auth.js';
import { TimeChart } from './charts.js';
import { commandList } from './commands.js';
import { Backoff, connection, isAbort, sleep } from './connection.js';
import { confirmDialog } from './dialogs.js';
import { byId, h, renderFacts, setText } from './dom.js';
import {
  codecName, describeFormat, formatAge, formatBitRate, formatBytes, formatCount, formatFps, formatTime, humanizeKey,
} from './format.js';
import { HistoryScrubber } from './history.js';
import { notify } from './notices.js';
import { snapshotForm } from './snapshot.js';
import { describeError, pullBadge, sourceProblem } from './source.js';
import { describeKeeper, showStanding } from './standing.js';
import { HISTORY_MS } from './store.js';
import { renderValue } from './values.js';

/** Status samples for the charts and counters while the view is open. */
const POLL_INTERVAL_MS = 1000;

const counterLabels = {
  bytes: ['Bytes received', formatBytes],
  framesDecoded: ['Pictures decoded', formatCount],
  accessUnits: ['Access units', formatCount],
  framesDroppedBeforeKeyframe: ['Not shown: before a keyframe or recovery', formatCount],
  framesRejectedTooLarge: ['Rejected as too large', formatCount],
  framesSkippedNotKeyframe: ['Skipped (keyframes only)', formatCount],
  framesSkippedLeading: ['Leading pictures skipped (RASL)', formatCount],
  unitsOutsideBaseLayer: ['NAL units outside the base layer', formatCount],
  decodeErrors: ['Decode errors', formatCount],
  uploadsAborted: ['Uploads cut off', formatCount],
  uploadsTakenOver: ['Uploads taken over by a newer push', formatCount],
};

/** Status members drawn by name; any other (a device, fallbacks, ...) is listed generically. */
const knownStatusKeys = new Set([
  'id', 'codec', 'codecStated', 'statedCodec', 'backend', 'backendReason', 'backendFallback', 'decode', 'decoding', 'decoder', 'quality', 'createdAt',
  'lastActivityAt', 'format',
  'counters', 'latestFrame', 'lastError', 'subscribers', 'waiting', 'uploading', 'rates', 'source', 'owner', 'origin',
  'persisted',
]);

/** What an on-demand session's decoder does, as the status row says it. */
const decoderStates = {
  idle: 'no decoder runs until a picture is asked for',
  queued: 'woken, waiting for a catch-up decoder',
  catching_up: 'catching up from the last keyframe',
  live: 'decoding live',
};

const removalReasons = {
  deleted: 'it was deleted',
  idle: 'it was idle for too long',
  limit: 'the server reached its session limit',
  shutdown: 'the server shut down',
  gone: 'the server no longer has it',
  undeclared: 'the configuration file no longer declares it',
  restarted: 'the configuration file declares it anew (another source, codec or back end)',
  declared: 'the configuration file took its name',
};

export class SessionView {
  constructor(store) {
    this.store = store;
    this.root = byId('session-page');
    this.id = null;
    this.controller = null;
    this.mjpegAttempt = 0;
    this.mjpegBackoff = new Backoff({ initial: 1000, max: 15_000 });
    store.addEventListener('change', (event) => this.onStoreChange(event.detail));
    connection.addEventListener('restored', () => this.restartStream());
    authEvents.addEventListener('signed-in', () => this.restartStream());
    authEvents.addEventListener('signed-out', () => this.restartStream());
  }

  get isOpen() {
    return this.id !== null;
  }

  open(id) {
    if (this.id === id) return;
    this.close();
    this.id = id;
    this.controller = new AbortController();
    this.build(id);
    this.pollLoop(id, this.controller.signal);
    const entry = this.store.get(id);
    if (entry) this.render(entry);
    this.heading.focus();
  }

  close() {
    this.controller?.abort();
    this.controller = null;
    this.history?.close();
    this.history = null;
    this.stopStream();
    this.id = null;
    this.root.replaceChildren();
  }

  build(id) {
    this.heading = h('h1', { tabindex: '-1', class: 'view-title' }, id);
    this.backendBadge = h('span', { class: 'badge badge-backend' });
    this.uploadingBadge = h('span', { class: 'badge badge-live', hidden: true }, 'receiving');
    this.pullBadge = h('span', { class: 'badge badge-pull', hidden: true });
    this.sourceFacts = h('div', { class: 'source-facts' });
    this.sourceProblem = h('p', { class: 'card-problem', role: 'status', hidden: true });
    this.retryButton = h('button', { type: 'button', id: 'retry-source' }, 'Retry now');
    this.retryButton.addEventListener('click', () => this.retrySource());
    this.standingBadge = h('span', { class: 'badge badge-standing', hidden: true });
    this.goneMessage = h('p', { class: 'gone-message', role: 'status', hidden: true });
    this.mjpegHolder = h('div', { class: 'mjpeg-holder' });
    this.mjpegState = h('p', { class: 'mjpeg-state', 'aria-live': 'polite' }, 'Connecting to the live stream…');
    this.formatFacts = h('div', { class: 'format-facts' });
    this.statusFacts = h('div', { class: 'status-facts' });
    this.counterFacts = h('div', { class: 'counter-facts' });
    this.errorFacts = h('div', { class: 'error-facts' });
    this.fpsChart = new TimeChart({ title: 'Pictures per second', format: formatFps, windowMs: HISTORY_MS });
    this.bitRateChart = new TimeChart({ title: 'Bit rate', format: formatBitRate, windowMs: HISTORY_MS });
    this.rateNote = h('p', { class: 'help' });
    this.commands = h('div', { class: 'command-holder' }, commandList(id));
    this.commandsKey = null;
    this.history = new HistoryScrubber(id);

    const section = (title, ...children) => {
      const headingId = `section-${title.toLowerCase().replace(/[^a-z]+/g, '-')}`;
      return h('section', { class: `panel ${headingId}`, 'aria-labelledby': headingId }, h('h2', { id: headingId }, title), ...children);
    };

    this.root.replaceChildren(
      h('div', { class: 'view-head' },
        h('a', { class: 'back-link', href: '#/' }, '← Sessions'),
        this.heading,
        h('div', { class: 'badges' }, this.backendBadge, this.standingBadge, this.pullBadge, this.uploadingBadge)),
      this.goneMessage,
      h('div', { class: 'session-layout' },
        h('section', { class: 'panel player', 'aria-labelledby': 'section-live' },
          h('h2', { id: 'section-live' }, 'Live'),
          this.mjpegHolder, this.mjpegState),
        this.sourceSection = section('Source', this.sourceFacts, this.sourceProblem,
          h('div', { class: 'source-actions' }, this.retryButton)),
        section('Format', this.formatFacts),
        section('Rates', h('div', { class: 'charts' }, this.fpsChart.element, this.bitRateChart.element), this.rateNote),
        section('Status', this.statusFacts),
        section('Counters', this.counterFacts),
        section('Last error', this.errorFacts),
        section('Recent past', this.history.element),
        section('Snapshot', snapshotForm(id)),
        section('Delete', this.buildDelete(id)),
        section('Commands', this.commands)));
  }

  buildDelete(id) {
    const button = h('button', { type: 'button', class: 'danger-button', id: 'delete-session' }, 'Delete session…');
    this.deleteButton = button;
    this.deleteHelp = h('p', { class: 'help' }, 'Removes the session from the server now.');
    button.addEventListener('click', async () => {
      const confirmed = await confirmDialog({
        title: `Delete ${id}?`,
        message: 'This frees its decoder and pictures and ends every viewer. A push to the same name later starts a new session.',
        confirmLabel: 'Delete',
      });
      if (!confirmed) return;
      button.disabled = true;
      try {
        await api.deleteSession(id);
        this.store.remove(id, { reason: 'deleted', fromEvent: true });
        notify(`Session ${id} deleted.`, { key: `deleted-${id}` });
        location.hash = '#/';
      } catch (error) {
        if (error instanceof ApiError && error.code === 'session_not_found') {
          this.store.remove(id, { reason: 'gone', fromEvent: true });
          location.hash = '#/';
        } else {
          notify(`Could not delete ${id}: ${error.message}`, { kind: 'error' });
        }
      } finally {
        button.disabled = false;
      }
    });
    return h('div', {}, this.deleteHelp, button);
  }

  // --- live data ---------------------------------------------------------------------------

  async pollLoop(id, signal) {
    const backoff = new Backoff();
    while (!signal.aborted) {
      try {
        const status = await api.session(id, { signal });
        this.store.applyStatus(status);
        backoff.reset();
        await sleep(POLL_INTERVAL_MS, signal);
      } catch (error) {
        if (isAbort(error)) return;
        if (error instanceof ApiError && error.code === 'session_not_found') {
          if (this.store.has(id)) this.store.remove(id, { reason: 'gone' });
          else this.showGone(id, null);
          await sleep(2000, signal).catch(() => {});  // it may be pushed again; keep looking
        } else if (error instanceof ApiError && error.status === 401) {
          await signInRequired();
        } else {
          await sleep(backoff.next(), signal).catch(() => {});  // the connection banner says why
        }
      }
    }
  }

  onStoreChange({ kind, id, reason }) {
    if (id !== this.id) return;
    if (kind === 'removed') {
      this.showGone(id, reason);
    } else {
      const entry = this.store.get(id);
      if (!entry) return;
      if (!this.goneMessage.hidden) this.goneMessage.hidden = true;
      this.render(entry);
    }
  }

  showGone(id, reason) {
    this.stopStream();
    // The later "not found" of the status poll keeps why the session ended.
    this.goneReason = reason ?? this.goneReason ?? null;
    setText(this.mjpegState, 'No live stream: the session does not exist.');
    this.goneMessage.hidden = false;
    setText(this.goneMessage, this.goneReason
      ? `Session ${id} ended: ${removalReasons[this.goneReason] ?? this.goneReason}. A new push to ${id} starts it again.`
      : `There is no session named ${id} (yet). This page shows it as soon as something is pushed to it.`);
    // What described the session is no longer true of anything: no badges, no source to retry.
    this.backendBadge.hidden = true;
    this.uploadingBadge.hidden = true;
    this.renderSource(null);
  }

  render(entry) {
    const status = entry.status;
    if (!this.img && this.goneMessage.hidden) this.startStream();
    // Chromium does not promise a load event per part of a multipart image; the size tells.
    if (this.img?.naturalWidth > 0 && this.mjpegState.textContent) {
      this.mjpegBackoff.reset();
      setText(this.mjpegState, '');
    }
    this.goneReason = null;
    this.backendBadge.hidden = false;
    setText(this.backendBadge, status.backend ?? 'starting');
    this.backendBadge.title = status.backendReason ?? '';
    this.uploadingBadge.hidden = !status.uploading;
    this.renderSource(status.source ?? null);
    showStanding(this.standingBadge, status);
    // The server answers a declared session's DELETE with 409: the file is where it goes.
    const declared = status.origin === 'declared';
    this.deleteButton.disabled = declared;
    setText(this.deleteHelp, declared
      ? 'Declared in the configuration file: remove it there, and the server removes it when it reads the file again.'
      : 'Removes the session from the server now.');

    const formatRows = describeFormat(status.format);
    if (formatRows.length) renderFacts(this.formatFacts, formatRows);
    else this.formatFacts.replaceChildren(h('p', { class: 'help' }, 'Known once the stream\'s sequence parameter set (SPS) arrived.'));

    // The commands push the session's codec once the stream (or its PUT) says which; a session
    // that pulls its stream takes no push (the server answers 409 session_busy).
    const commandsKey = `${status.codec ?? ''}/${status.source ? 'pull' : 'push'}`;
    if (commandsKey !== this.commandsKey) {
      this.commandsKey = commandsKey;
      this.commands.replaceChildren(commandList(this.id, status.codec ?? null, { pushes: !status.source }));
    }

    const frame = status.latestFrame;
    const age = entry.pictureAge();
    renderFacts(this.statusFacts, [
      ['Codec', describeCodec(status)],
      // The reason already names the back end ("software: VA-API unavailable: ...").
      ['Back end', status.backendReason ?? status.backend ?? '—'],
      ['Decoding', describeDecoding(status)],
      ['JPEG quality', status.quality ?? '—'],
      ['Latest picture', frame
        ? `#${frame.seq}, ${frame.width}×${frame.height}${frame.keyframe ? ', keyframe' : ''}, ${formatAge(age)} old`
        : 'none yet'],
      ['Viewers', `${status.subscribers ?? 0} MJPEG${Number.isFinite(status.waiting) ? `, ${status.waiting} waiting` : ''}`],
      ['Receiving', describeReceiving(status)],
      ['Kept by', describeKeeper(status)],
      ['Created', status.createdAt ? formatTime(status.createdAt) : '—'],
      ['Last activity', status.lastActivityAt ? formatTime(status.lastActivityAt) : '—'],
      ...Object.entries(status).filter(([key]) => !knownStatusKeys.has(key))
        .map(([key, value]) => [humanizeKey(key), renderValue(value, key)]),
    ]);

    const counters = status.counters ?? {};
    const counterRows = [];
    // The known counters in a sensible order, then any the server added since.
    const keys = [...Object.keys(counterLabels), ...Object.keys(counters).filter((key) => !(key in counterLabels)).sort()];
    for (const key of keys) {
      const value = counters[key];
      const [label, format] = counterLabels[key] ?? [humanizeKey(key), formatCount];
      if (typeof value === 'number') counterRows.push([label, format(value)]);
    }
    const nalUnits = counters.nalUnits ?? {};
    const nalText = Object.entries(nalUnits).sort(([a], [b]) => a.localeCompare(b)).map(([type, count]) => `${type} ${formatCount(count)}`).join(' · ');
    counterRows.push(['NAL units', nalText || 'none yet']);
    renderFacts(this.counterFacts, counterRows);

    const error = status.lastError;
    this.errorFacts.replaceChildren(error
      ? h('div', { class: 'error-box', role: 'status' },
        h('p', { class: 'error-code' }, error.code),
        h('p', {}, error.message ?? ''),
        h('p', { class: 'help' }, error.at ? `at ${formatTime(error.at)}` : ''))
      : h('p', { class: 'help' }, 'No error so far.'));

    const history = entry.rateHistory;
    this.fpsChart.update(history.map((sample) => ({ t: sample.t, v: sample.fps })));
    this.bitRateChart.update(history.map((sample) => ({ t: sample.t, v: sample.bps })));
    setText(this.rateNote, entry.rateSource === 'server'
      ? `Measured by the server over ${status.rates?.windowSeconds ?? '?'} s.`
      : 'Computed here from the decoded-picture and byte counters, sampled every second.');
  }

  /** A pull session's source: where it stands, why it is not live, when it tries again. */
  renderSource(source) {
    this.sourceSection.hidden = !source;
    const badge = pullBadge(source);
    this.pullBadge.hidden = !badge;
    if (!source || !badge) return;
    setText(this.pullBadge, badge.text);
    this.pullBadge.className = `badge badge-pull badge-${badge.kind}`;
    renderFacts(this.sourceFacts, [
      ['URL', source.url ?? '—'],
      ...(source.transport ? [['Transport', source.transport]] : []),
      ['Connects', source.connect === 'on-demand' ? 'while pictures are asked for' : 'always'],
      ['State', source.state ?? '—'],
      ['Read as', source.format ?? 'not connected yet'],
      ['Connected', source.connectedAt ? formatTime(source.connectedAt) : 'no'],
      ['Failed attempts in a row', formatCount(source.failures ?? 0)],
      ['Reconnects', formatCount(source.reconnects ?? 0)],
      ['Next attempt', source.nextAttemptAt ? formatTime(source.nextAttemptAt) : '—'],
      ['Last problem', source.lastError ? describeError(source.lastError) : 'none so far'],
    ]);
    const problem = sourceProblem(source);
    this.sourceProblem.hidden = !problem;
    if (problem) setText(this.sourceProblem, problem);
    this.retryButton.disabled = source.state !== 'retrying';
  }

  async retrySource() {
    const id = this.id;
    this.retryButton.disabled = true;
    try {
      this.store.applyStatus(await api.retrySource(id));
      notify(`${id}: connecting to its source now.`, { key: `retry-${id}` });
    } catch (error) {
      notify(`Could not retry ${id}'s source: ${error.message}`, { kind: 'error' });
    }
  }

  // --- MJPEG ---------------------------------------------------------------------------------

  startStream() {
    if (!this.id) return;
    this.stopStream();
    const id = this.id;
    // A new URL each attempt, so the browser never answers from what it has.
    const attempt = this.mjpegAttempt++;
    const path = sessionPath(id, `/frames.mjpeg${attempt ? `?attempt=${attempt}` : ''}`);
    const img = h('img', { class: 'mjpeg', id: 'mjpeg', alt: `Live picture of ${id}` });
    img.addEventListener('load', () => {
      this.mjpegBackoff.reset();
      setText(this.mjpegState, '');
    }, { once: true });
    img.addEventListener('error', () => this.onStreamError(img));
    img.src = withAccessToken(path);
    this.img = img;
    this.mjpegHolder.replaceChildren(img);
  }

  stopStream() {
    clearTimeout(this.mjpegRetry);
    if (!this.img) return;
    // Dropping the source ends the request, so the server counts one viewer less at once.
    this.img.removeAttribute('src');
    this.img.remove();
    this.img = null;
  }

  restartStream() {
    if (this.img) this.startStream();
  }

  onStreamError(img) {
    if (img !== this.img) return;
    const delay = this.mjpegBackoff.next();
    setText(this.mjpegState, `The live stream stopped; reconnecting in ${Math.ceil(delay / 1000)} s…`);
    clearTimeout(this.mjpegRetry);
    this.mjpegRetry = setTimeout(() => {
      if (this.img === img) this.startStream();
    }, delay);
  }
}

/** Whether bytes come in now: a push's body arriving, or a pull reading its source. */
function describeReceiving(status) {
  if (status.uploading) return 'yes, an upload is running';
  if (status.source?.state === 'live') return 'yes, pulled live from its source';
  return 'no';
}

/** The running stream's codec and how it is known; a codec stated for the next stream beside it. */
function describeCodec(status) {
  const stated = status.statedCodec ?? null;
  if (!status.codec) {
    return stated ? `${codecName(stated)} (stated for the session)` : 'not known yet: the first parameter set tells';
  }
  const running = `${codecName(status.codec)} (${status.codecStated ? 'stated for the session' : 'detected from its parameter sets'})`;
  return stated && stated !== status.codec ? `${running}; ${codecName(stated)} stated, from the next stream` : running;
}

/** "all pictures", "keyframes only", "on demand: decoding live"... */
function describeDecoding(status) {
  switch (status.decode) {
    case 'keyframes': return 'keyframes only';
    case 'all': return 'all pictures';
    case 'on-demand': return `on demand: ${decoderStates[status.decoder] ?? status.decoder ?? '—'}`;
    default: return status.decode ?? '—';
  }
}
