// One session up close: live MJPEG, the stream's format, counters with fps and bit-rate
// charts, the last error, a snapshot download, copy-ready commands and delete.

import { api, apiFetch, ApiError, sessionPath } from './api.js';
import { authEvents, currentToken, signInRequired, withAccessToken } from './auth.js';
import { TimeChart } from './charts.js';
import { Backoff, connection, isAbort, sleep } from './connection.js';
import { byId, h, renderFacts, setText } from './dom.js';
import {
  describeFormat, formatAge, formatBitRate, formatBytes, formatCount, formatFps, formatTime, humanizeKey,
} from './format.js';
import { notify } from './notices.js';
import { HISTORY_MS } from './store.js';

/** Status samples for the charts and counters while the view is open. */
const POLL_INTERVAL_MS = 1000;

const counterLabels = {
  bytes: ['Bytes received', formatBytes],
  framesDecoded: ['Pictures decoded', formatCount],
  accessUnits: ['Access units', formatCount],
  framesDroppedBeforeKeyframe: ['Dropped before a keyframe', formatCount],
  framesRejectedTooLarge: ['Rejected as too large', formatCount],
  framesSkippedNotKeyframe: ['Skipped (keyframes only)', formatCount],
  decodeErrors: ['Decode errors', formatCount],
  uploadsAborted: ['Uploads cut off', formatCount],
};

const removalReasons = {
  deleted: 'it was deleted',
  idle: 'it was idle for too long',
  limit: 'the server reached its session limit',
  shutdown: 'the server shut down',
  gone: 'the server no longer has it',
};

/**
 * Shell commands for this session, built from the page's own origin. With a token they read it
 * from $FRAMETAP_TOKEN rather than showing it on screen.
 */
export function sessionCommands(id, origin, withToken) {
  const base = `${origin}/sessions/${id}`;
  const curlAuth = withToken ? ' -H "Authorization: Bearer $FRAMETAP_TOKEN"' : '';
  const ffmpegAuth = withToken ? ' -headers "Authorization: Bearer $FRAMETAP_TOKEN"' : '';
  const query = withToken ? '?access_token=$FRAMETAP_TOKEN' : '';
  const quote = withToken ? '"' : "'";
  return [
    ['Push a live stream (ffmpeg)', `ffmpeg -re -i camera.264 -c copy -f h264 -method POST -chunked_post 1${ffmpegAuth} ${base}/nalus`],
    ['Push a file (curl)', `curl --data-binary @file.264${curlAuth} '${base}/nalus?flush=true'`],
    ['Latest picture (curl)', `curl -o latest.jpg${curlAuth} ${base}/frame/latest.jpg`],
    ['320 px thumbnail (curl)', `curl -o thumb.jpg${curlAuth} '${base}/frame/latest.jpg?width=320'`],
    ['Watch (ffplay)', `ffplay -f mpjpeg ${quote}${base}/frames.mjpeg${query}${quote}`],
    ['Save pictures from the stream (ffmpeg)', `ffmpeg -f mpjpeg -i ${quote}${base}/frames.mjpeg${query}${quote} -c copy -f image2 frame-%05d.jpg`],
  ];
}

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
    this.stopStream();
    this.id = null;
    this.root.replaceChildren();
  }

  build(id) {
    this.heading = h('h1', { tabindex: '-1', class: 'view-title' }, id);
    this.backendBadge = h('span', { class: 'badge badge-backend' });
    this.uploadingBadge = h('span', { class: 'badge badge-live', hidden: true }, 'receiving');
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

    const section = (title, ...children) => {
      const headingId = `section-${title.toLowerCase().replace(/[^a-z]+/g, '-')}`;
      return h('section', { class: `panel ${headingId}`, 'aria-labelledby': headingId }, h('h2', { id: headingId }, title), ...children);
    };

    this.root.replaceChildren(
      h('div', { class: 'view-head' },
        h('a', { class: 'back-link', href: '#/' }, '← Sessions'),
        this.heading,
        h('div', { class: 'badges' }, this.backendBadge, this.uploadingBadge)),
      this.goneMessage,
      h('div', { class: 'session-layout' },
        h('section', { class: 'panel player', 'aria-labelledby': 'section-live' },
          h('h2', { id: 'section-live' }, 'Live'),
          this.mjpegHolder, this.mjpegState),
        section('Format', this.formatFacts),
        section('Rates', h('div', { class: 'charts' }, this.fpsChart.element, this.bitRateChart.element), this.rateNote),
        section('Status', this.statusFacts),
        section('Counters', this.counterFacts),
        section('Last error', this.errorFacts),
        section('Snapshot', this.buildSnapshotForm(id)),
        section('Delete', this.buildDelete(id)),
        section('Commands', this.buildCommands(id))));
  }

  buildSnapshotForm(id) {
    const input = h('input', {
      id: 'snapshot-width', name: 'width', type: 'number', min: '1', max: '8192', step: '1', inputmode: 'numeric',
      placeholder: 'full size', 'aria-describedby': 'snapshot-help snapshot-message',
    });
    const message = h('p', { id: 'snapshot-message', class: 'field-message', 'aria-live': 'polite' });
    const button = h('button', { type: 'submit', id: 'snapshot-download' }, 'Download JPEG');
    const form = h('form', { class: 'snapshot-form', novalidate: true },
      h('div', { class: 'field' },
        h('label', { for: 'snapshot-width' }, 'Width in pixels'),
        input,
        h('p', { id: 'snapshot-help', class: 'help' }, 'Leave empty for the picture\'s own size; the height keeps the aspect ratio (at most twice the picture\'s size).')),
      h('div', { class: 'actions' }, button),
      message);
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const width = input.value.trim();
      if (width && !(Number.isInteger(Number(width)) && Number(width) >= 1 && Number(width) <= 8192)) {
        setText(message, 'The width must be a whole number from 1 to 8192.');
        input.setAttribute('aria-invalid', 'true');
        input.focus();
        return;
      }
      input.removeAttribute('aria-invalid');
      button.disabled = true;
      setText(message, 'Fetching the picture…');
      try {
        await downloadSnapshot(id, width ? Number(width) : null);
        setText(message, 'Downloaded.');
      } catch (error) {
        setText(message, `No snapshot: ${error.message}`);
      } finally {
        button.disabled = false;
      }
    });
    return form;
  }

  buildCommands(id) {
    const withToken = Boolean(currentToken());
    const items = sessionCommands(id, location.origin, withToken).map(([label, command], index) => {
      const code = h('code', { id: `command-${index}` }, command);
      const button = h('button', { type: 'button', class: 'copy-button', 'aria-describedby': `command-label-${index}` }, 'Copy');
      button.addEventListener('click', () => copyText(command, code, button));
      return h('li', { class: 'command' },
        h('span', { class: 'command-label', id: `command-label-${index}` }, label),
        h('div', { class: 'command-line' }, h('pre', {}, code), button));
    });
    return h('div', {},
      withToken ? h('p', { class: 'help' }, 'These read the token from $FRAMETAP_TOKEN: export FRAMETAP_TOKEN=… first.') : null,
      h('ul', { class: 'commands' }, items));
  }

  buildDelete(id) {
    const button = h('button', { type: 'button', class: 'danger-button', id: 'delete-session' }, 'Delete session…');
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
    return h('div', {}, h('p', { class: 'help' }, 'Removes the session from the server now.'), button);
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
    setText(this.mjpegState, 'No live stream: the session does not exist.');
    this.goneMessage.hidden = false;
    setText(this.goneMessage, reason
      ? `Session ${id} ended: ${removalReasons[reason] ?? reason}. A new push to ${id} starts it again.`
      : `There is no session named ${id} (yet). This page shows it as soon as something is pushed to it.`);
  }

  render(entry) {
    const status = entry.status;
    if (!this.img && this.goneMessage.hidden) this.startStream();
    // Chromium does not promise a load event per part of a multipart image; the size tells.
    if (this.img?.naturalWidth > 0 && this.mjpegState.textContent) {
      this.mjpegBackoff.reset();
      setText(this.mjpegState, '');
    }
    setText(this.backendBadge, status.backend ?? 'starting');
    this.backendBadge.title = status.backendReason ?? '';
    this.uploadingBadge.hidden = !status.uploading;

    const formatRows = describeFormat(status.format);
    if (formatRows.length) renderFacts(this.formatFacts, formatRows);
    else this.formatFacts.replaceChildren(h('p', { class: 'help' }, 'Known once the stream\'s sequence parameter set (SPS) arrived.'));

    const frame = status.latestFrame;
    const age = entry.pictureAge();
    renderFacts(this.statusFacts, [
      // The reason already names the back end ("software: VA-API unavailable: ...").
      ['Back end', status.backendReason ?? status.backend ?? '—'],
      ['Decoding', status.decode === 'keyframes' ? 'keyframes only' : (status.decode ?? '—')],
      ['JPEG quality', status.quality ?? '—'],
      ['Latest picture', frame
        ? `#${frame.seq}, ${frame.width}×${frame.height}${frame.keyframe ? ', keyframe' : ''}, ${formatAge(age)} old`
        : 'none yet'],
      ['Viewers', `${status.subscribers ?? 0} MJPEG${Number.isFinite(status.waiting) ? `, ${status.waiting} waiting` : ''}`],
      ['Receiving', status.uploading ? 'yes, an upload is running' : 'no'],
      ['Created', status.createdAt ? formatTime(status.createdAt) : '—'],
      ['Last activity', status.lastActivityAt ? formatTime(status.lastActivityAt) : '—'],
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

/** Fetches latest.jpg (with the token header) and saves it through a temporary link. */
async function downloadSnapshot(id, width) {
  const response = await apiFetch(sessionPath(id, `/frame/latest.jpg${width ? `?width=${width}` : ''}`));
  const seq = response.headers.get('X-Frame-Seq') ?? 'latest';
  const blob = await response.blob();
  const url = URL.createObjectURL(blob);
  const link = h('a', { href: url, download: `${id}-${seq}${width ? `-w${width}` : ''}.jpg`, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** The clipboard API needs a secure context (https or localhost); elsewhere select the text. */
async function copyText(text, codeElement, button) {
  let copied = false;
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      copied = true;
    }
  } catch {
    copied = false;
  }
  if (!copied) {
    const range = document.createRange();
    range.selectNodeContents(codeElement);
    const selection = getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    try {
      copied = document.execCommand('copy');
    } catch {
      copied = false;
    }
  }
  setText(button, copied ? 'Copied' : 'Selected: press Ctrl+C');
  setTimeout(() => setText(button, 'Copy'), 2500);
}

/** The page's confirmation dialog; resolves true when the operator confirms. */
export function confirmDialog({ title, message, confirmLabel }) {
  const dialog = byId('confirm-dialog');
  setText(byId('confirm-title'), title);
  setText(byId('confirm-message'), message);
  const confirmButton = byId('confirm-accept');
  setText(confirmButton, confirmLabel);
  return new Promise((resolve) => {
    const onClose = () => {
      dialog.removeEventListener('close', onClose);
      resolve(dialog.returnValue === 'confirm');
    };
    dialog.returnValue = '';
    dialog.addEventListener('close', onClose);
    dialog.showModal();
    byId('confirm-cancel').focus();
  });
}
