// Pull a source: make a session that pulls an RTSP, RTMP, SRT or HTTP(S) stream
// (PUT /sessions/ID with a source). Only the admin token may; the server also checks the URL
// against its --allow-sources list before it connects anywhere, and says so when it may not.

import { apiFetch, isValidSessionId, sessionPath } from './api.js';
import { byId, DisclosurePanel, setText } from './dom.js';
import { notify } from './notices.js';

export class PullPanel extends DisclosurePanel {
  constructor(store, sync) {
    super('pull');
    this.store = store;
    this.sync = sync;
    this.form = byId('pull-form');
    this.nameInput = byId('pull-session-name');
    this.urlInput = byId('pull-url');
    this.transport = byId('pull-transport');
    this.connect = byId('pull-connect');
    this.message = byId('pull-message');

    this.urlInput.addEventListener('input', () => this.showTransport());
    this.form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.submit();
    });
  }

  opened() {
    this.showTransport();
    this.urlInput.focus();
  }

  showTransport() {
    byId('pull-transport-field').hidden = !/^rtsp:/i.test(this.urlInput.value.trim());
  }

  async submit() {
    const id = this.nameInput.value.trim();
    const url = this.urlInput.value.trim();
    if (!isValidSessionId(id)) {
      setText(this.message, 'The session name: letters, digits and . _ ~ -, up to 128 characters.');
      this.nameInput.focus();
      return;
    }
    if (!/^(rtsp|rtmp|srt|https?):\/\//i.test(url)) {
      setText(this.message, 'The URL starts with rtsp://, rtmp://, srt://, http:// or https://.');
      this.urlInput.focus();
      return;
    }
    const source = { url };
    if (/^rtsp:/i.test(url)) source.transport = this.transport.value;
    if (this.connect.value === 'on-demand') source.connect = 'on-demand';
    setText(this.message, '');
    try {
      await apiFetch(sessionPath(id), {
        method: 'PUT', body: JSON.stringify({ source }), headers: { 'Content-Type': 'application/json' },
      });
      notify(source.connect ? `Session ${id} connects when its pictures are asked for.`
        : `Session ${id} pulls its source now.`, { key: 'pull' });
      this.sync.refreshNow();
      this.close();
      location.hash = `#/sessions/${encodeURIComponent(id)}`;
    } catch (error) {
      setText(this.message, error.code === 'forbidden'
        ? 'Only the admin token may make a pull session.'
        : error.message);
    }
  }
}
