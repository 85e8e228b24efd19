// Pushing a .264 or .265 file from the browser: pick it or drop it anywhere on the page, name a
// new session or choose an existing one, and watch the upload progress while the session's
// pictures appear (the preview and the session's card update as the server decodes). The file's
// extension says its codec (api.js streamContentType).

import { api, ApiError, isValidSessionId, uploadFile } from './api.js';
import { signInRequired } from './auth.js';
import { isAbort } from './connection.js';
import { byId, DisclosurePanel, h, setText } from './dom.js';
import { formatBytes, formatSummary } from './format.js';
import { ThumbnailFeed } from './thumbnails.js';

/** A session name from a file name: "Front door (2).264" -> "Front-door-2" (".265" alike). */
export function sessionNameFromFile(fileName, taken = new Set()) {
  let base = fileName.replace(/\.[^.]*$/, '').replace(/[^A-Za-z0-9._~-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 120);
  if (!isValidSessionId(base)) base = 'upload';
  let name = base;
  for (let n = 2; taken.has(name); n += 1) name = `${base}-${n}`;
  return name;
}

export class UploadPanel extends DisclosurePanel {
  constructor(store, sync) {
    super('upload');
    this.store = store;
    this.sync = sync;
    this.form = byId('upload-form');
    this.fileInput = byId('upload-file');
    this.nameInput = byId('upload-session-name');
    this.nameMessage = byId('upload-name-message');
    this.fileMessage = byId('upload-file-message');
    this.select = byId('upload-session-select');
    this.newField = byId('new-session-field');
    this.existingField = byId('existing-session-field');
    this.startButton = byId('upload-start');
    this.cancelButton = byId('upload-cancel');
    this.progress = byId('upload-progress');
    this.bar = byId('upload-bar');
    this.progressLabel = byId('upload-progress-label');
    this.result = byId('upload-result');
    this.preview = byId('upload-preview');
    this.droppedFile = null;
    this.controller = null;
    this.feed = null;

    this.fileInput.addEventListener('change', () => {
      this.droppedFile = null;
      this.onFileChosen(this.fileInput.files[0] ?? null);
    });
    for (const radio of this.form.elements.target) radio.addEventListener('change', () => this.showTarget());
    this.nameInput.addEventListener('input', () => this.validateName());
    this.form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.start();
    });
    this.cancelButton.addEventListener('click', () => this.controller?.abort());
    store.addEventListener('change', (event) => {
      if (['added', 'removed', 'loaded'].includes(event.detail.kind)) this.fillSessions();
    });
  }

  get file() {
    return this.droppedFile ?? this.fileInput.files[0] ?? null;
  }

  get target() {
    return this.form.elements.target.value;
  }

  /** `file` comes from a drop, `sessionId` preselects an existing session. */
  opened({ file = null, sessionId = null } = {}) {
    this.fillSessions();
    if (sessionId && this.store.has(sessionId)) {
      this.form.elements.target.value = 'existing';
      this.select.value = sessionId;
    }
    this.showTarget();
    if (file) {
      this.droppedFile = file;
      this.fileInput.value = '';
      this.onFileChosen(file);
      this.startButton.focus();
    } else {
      this.fileInput.focus();
    }
  }

  mayClose() {
    return !this.controller;  // an upload is running: the panel shows its progress
  }

  closed() {
    this.stopPreview();
  }

  onFileChosen(file) {
    setText(this.fileMessage, file ? `${file.name}, ${formatBytes(file.size)}` : '');
    if (file && !this.nameInput.value) {
      this.nameInput.value = sessionNameFromFile(file.name, new Set(this.store.list().map((entry) => entry.id)));
      this.validateName();
    }
  }

  fillSessions() {
    const current = this.select.value;
    const ids = this.store.list().map((entry) => entry.id);
    this.select.replaceChildren(...(ids.length
      ? ids.map((id) => h('option', { value: id }, id))
      : [h('option', { value: '', disabled: true }, 'no sessions yet')]));
    if (ids.includes(current)) this.select.value = current;
    this.form.elements.target[1].disabled = ids.length === 0;
    if (ids.length === 0 && this.target === 'existing') {
      this.form.elements.target.value = 'new';
      this.showTarget();
    }
  }

  showTarget() {
    const existing = this.target === 'existing';
    this.newField.hidden = existing;
    this.existingField.hidden = !existing;
  }

  /** The new session's name, or null after saying what is wrong with it. */
  validateName() {
    const name = this.nameInput.value.trim();
    let problem = '';
    if (!name) problem = 'Give the new session a name.';
    else if (name === '.' || name === '..') problem = 'A session cannot be named . or ..';
    else if (name.length > 128) problem = 'At most 128 characters.';
    else if (!isValidSessionId(name)) problem = 'Only letters, digits and . _ ~ - are allowed.';
    else if (this.store.has(name)) problem = `${name} already exists: choose it under "Existing session", or pick another name.`;
    setText(this.nameMessage, problem);
    if (problem) this.nameInput.setAttribute('aria-invalid', 'true');
    else this.nameInput.removeAttribute('aria-invalid');
    return problem ? null : name;
  }

  async start() {
    if (this.controller) return;
    const file = this.file;
    if (!file) {
      setText(this.fileMessage, 'Choose a .264 or .265 file (H.264 or H.265 Annex B) first.');
      this.fileInput.focus();
      return;
    }
    let id;
    if (this.target === 'existing') {
      id = this.select.value;
      if (!id) return;
    } else {
      id = this.validateName();
      if (!id) {
        this.nameInput.focus();
        return;
      }
    }
    this.controller = new AbortController();
    this.setBusy(true);
    setText(this.result, '');
    this.result.className = 'upload-result';
    this.bar.value = 0;
    setText(this.progressLabel, `Pushing ${file.name} to ${id}…`);
    this.progress.hidden = false;
    try {
      // A cheap authenticated call first: a server that wants a token gets it before the body
      // goes out (a 401 arriving mid-upload looks like a broken connection to XHR).
      for (;;) {
        try {
          await api.listSessions();
          break;
        } catch (error) {
          if (!(error instanceof ApiError && error.status === 401)) throw error;
          setText(this.progressLabel, 'Sign in to push.');
          await signInRequired();
        }
      }
      this.startPreview(id);
      let announced = false;
      const summary = await uploadFile(id, file, {
        signal: this.controller.signal,
        onProgress: (loaded, total, { sent = false } = {}) => {
          if (!announced) {
            announced = true;
            this.sync.refreshNow();  // the session exists from the first byte on: show its card
          }
          this.bar.max = Math.max(1, total);
          this.bar.value = loaded;
          const percent = total ? Math.round((loaded / total) * 100) : 100;
          setText(this.progressLabel, sent
            ? `Sent ${formatBytes(total)}; the server is decoding the rest…`
            : `Sending ${percent} % (${formatBytes(loaded)} of ${formatBytes(total)})…`);
        },
      });
      this.showResult(file, id, summary);
      this.sync.refreshNow();
    } catch (error) {
      this.result.className = 'upload-result upload-failed';
      if (isAbort(error)) setText(this.result, 'Upload cancelled. What arrived so far was decoded.');
      else setText(this.result, `The push failed: ${error instanceof ApiError ? error.message : String(error)}`);
      setText(this.progressLabel, '');
    } finally {
      this.controller = null;
      this.setBusy(false);
    }
  }

  showResult(file, id, summary) {
    this.bar.value = this.bar.max;
    setText(this.progressLabel, `Pushed ${file.name} to ${id}.`);
    const pictures = `${summary.frames} picture${summary.frames === 1 ? '' : 's'}`;
    const errors = summary.decodeErrors
      ? `; ${summary.decodeErrors} decode error${summary.decodeErrors === 1 ? '' : 's'}${summary.error ? ` (${summary.error.message})` : ''}` : '';
    this.result.className = `upload-result ${summary.decodeErrors ? 'upload-warning' : 'upload-ok'}`;
    this.result.replaceChildren(
      `${pictures} decoded from ${formatBytes(summary.bytes)}, ${formatSummary(summary.format)}${errors}. `,
      h('a', { href: `#/sessions/${encodeURIComponent(id)}` }, `Open ${id}`));
    this.nameInput.value = '';
    this.fileInput.value = '';
    this.droppedFile = null;
    setText(this.fileMessage, '');
  }

  startPreview(id) {
    this.stopPreview();
    this.preview.hidden = true;
    this.preview.alt = `Latest picture of ${id}`;
    this.feed = new ThumbnailFeed(id, this.preview, {
      maxWidth: 240,
      waitForSession: true,
      sourceWidth: () => this.store.get(id)?.status.format?.width ?? null,
      latestSeq: () => this.store.get(id)?.status.latestFrame?.seq ?? null,
      onPicture: () => {
        this.preview.hidden = false;
      },
    });
    this.feed.start();
  }

  stopPreview() {
    this.feed?.dispose();
    this.feed = null;
  }

  setBusy(busy) {
    this.startButton.disabled = busy;
    this.cancelButton.hidden = !busy;
    this.fileInput.disabled = busy;
    this.form.setAttribute('aria-busy', busy ? 'true' : 'false');
  }
}

/**
 * Dragging files over the page shows a drop target; a drop hands the first file to `onFile`.
 * The counter handles dragenter/dragleave pairs fired by every child element crossed.
 */
export function enableDrop(onFile) {
  const overlay = byId('drop-overlay');
  let depth = 0;
  const carriesFiles = (event) => [...(event.dataTransfer?.types ?? [])].includes('Files');
  window.addEventListener('dragenter', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    depth += 1;
    overlay.hidden = false;
  });
  window.addEventListener('dragover', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = 'copy';
  });
  window.addEventListener('dragleave', (event) => {
    if (!carriesFiles(event)) return;
    depth = Math.max(0, depth - 1);
    if (depth === 0) overlay.hidden = true;
  });
  window.addEventListener('drop', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    depth = 0;
    overlay.hidden = true;
    const file = event.dataTransfer.files[0];
    if (file) onFile(file);
  });
}
