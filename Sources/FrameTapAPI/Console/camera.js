// Share a camera: the browser's camera (a phone's too) becomes a session. getUserMedia captures
// it (only in a secure context: HTTPS, or http://localhost), WebCodecs' VideoEncoder encodes
// H.264 as Annex B where the browser has it, and MediaRecorder records WebM (H.264 where the
// browser can, which FrameTap reads through its Matroska demuxer) where it has not.
//
// The encoded pieces go to POST /sessions/ID/nalus one request after another: a session's
// stream continues across pushes. One long streaming request would need HTTP/2 (Chromium
// refuses a ReadableStream body with duplex: 'half' over HTTP/1.1, which is what FrameTap
// speaks), so whatever was encoded while one request was on its way goes in the next: at most
// one request is in flight per session, as FrameTap allows (a second one is 409 session_busy).

import { ApiError, apiFetch, isValidSessionId, sessionPath } from './api.js';
import { byId, DisclosurePanel, setText } from './dom.js';
import { notify } from './notices.js';

/** What the encoder makes: about 720p at 30 pictures per second, a keyframe every 2 s. */
const TARGET = { width: 1280, height: 720, frameRate: 30, bitrate: 2_500_000, keyframeEvery: 60 };

/** The H.264 profiles to try, most compatible first: Constrained Baseline, then Main, High. */
const AVC_CODECS = ['avc1.42E01F', 'avc1.42E028', 'avc1.4D401F', 'avc1.4D4028', 'avc1.640028'];

/** Which encoder this browser offers: `webcodecs`, `mediarecorder`, or null. */
export function availableEncoder(preferred = 'auto') {
  const webcodecs = typeof VideoEncoder === 'function' && typeof VideoFrame === 'function';
  const recorder = typeof MediaRecorder === 'function';
  if (preferred === 'webcodecs') return webcodecs ? 'webcodecs' : null;
  if (preferred === 'mediarecorder') return recorder ? 'mediarecorder' : null;
  return webcodecs ? 'webcodecs' : recorder ? 'mediarecorder' : null;
}

/** The WebM type MediaRecorder should record: H.264 when it can (FrameTap decodes no VP8). */
export function recorderType() {
  const types = ['video/webm;codecs=h264', 'video/webm;codecs=avc1', 'video/x-matroska;codecs=avc1', 'video/webm'];
  return types.find((type) => MediaRecorder.isTypeSupported(type)) ?? '';
}

/**
 * This tab's name as a publisher of the sessions it shares its camera to, kept across reloads of
 * the tab (a reload then takes over its own lost upload too).
 */
export function tabPublisher() {
  const made = () => `console-${Math.random().toString(36).slice(2, 10)}`;
  try {
    let name = sessionStorage.getItem('frametap.publisher');
    if (!name) {
      name = made();
      sessionStorage.setItem('frametap.publisher', name);
    }
    return name;
  } catch {
    // No storage (a private window may refuse it): a name for this page alone.
    tabPublisher.fallback ??= made();
    return tabPublisher.fallback;
  }
}

/**
 * Sends encoded pieces to a session, one request at a time; pieces that arrive while a request
 * is on its way are sent together in the next one.
 */
export class PushQueue {
  /**
   * `publisher`: the name every request gives (`?publisher=`): the session's stream is this
   * tab's while it pushes, another client's pushes are refused rather than interleaved with its
   * own, and its own upload lost with a connection is taken over by its next push.
   */
  constructor(sessionId, contentType, { onError, onSent, publisher = tabPublisher() } = {}) {
    this.sessionId = sessionId;
    this.contentType = contentType;
    this.publisher = publisher;
    this.pending = [];
    this.sending = false;
    this.closed = false;
    this.onError = onError ?? (() => {});
    this.onSent = onSent ?? (() => {});
    this.bytesSent = 0;
    this.requests = 0;
    /**
     * Nothing more, and no closing flush: another client pushes to the session (409
     * session_busy) or took it over (push_taken_over), the session was deleted (a flush would make
     * it again) or the token no longer serves (401, 403).
     */
    this.failed = false;
  }

  /** The push URL: this queue's publisher, and `extra` parameters. */
  path(extra = {}) {
    const query = new URLSearchParams({ publisher: this.publisher, ...extra });
    return sessionPath(this.sessionId, `/nalus?${query}`);
  }

  add(piece) {
    if (this.closed || this.failed) return;
    this.pending.push(piece);
    if (!this.sending) this.sendNext();
  }

  async sendNext() {
    if (this.sending || this.pending.length === 0) return;
    this.sending = true;
    const pieces = this.pending;
    this.pending = [];
    const body = new Blob(pieces);
    try {
      await apiFetch(this.path(), {
        method: 'POST', body, headers: { 'Content-Type': this.contentType },
      });
      this.bytesSent += body.size;
      this.requests += 1;
      this.onSent(this);
    } catch (error) {
      if (error instanceof ApiError
        && (['session_busy', 'push_taken_over', 'session_not_found'].includes(error.code) || [401, 403].includes(error.status))) {
        this.failed = true;
        this.pending = [];
      }
      if (!this.closed) this.onError(error);
    } finally {
      this.sending = false;
    }
    if (!this.closed && !this.failed) this.sendNext();
  }

  /**
   * Sends what is left with ?flush=true, so the last pictures come out, then stops; not when
   * `failed` says the stream is no longer this page's to end.
   */
  async finish() {
    this.closed = true;
    while (this.sending) await new Promise((resolve) => setTimeout(resolve, 20));
    const body = new Blob(this.pending);
    this.pending = [];
    if (this.failed) return;
    try {
      await apiFetch(this.path({ flush: 'true' }), {
        method: 'POST', body, headers: { 'Content-Type': this.contentType },
      });
    } catch {
      // The session may be gone already; the camera stops either way.
    }
  }
}

/** The "Share a camera" panel on the sessions page. */
export class CameraPanel extends DisclosurePanel {
  constructor(store) {
    super('camera');
    this.store = store;
    this.form = byId('camera-form');
    this.nameInput = byId('camera-session-name');
    this.message = byId('camera-message');
    this.startButton = byId('camera-start');
    this.stopButton = byId('camera-stop');
    this.preview = byId('camera-preview');
    this.state = byId('camera-state');
    /** The camera while it is shared (kept across reconnections), its session and encoder. */
    this.camera = null;
    /** The share that encodes and pushes now; null while waiting to share again. */
    this.share = null;
    this.retry = { timer: null, delay: 0, since: null };

    this.form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.start();
    });
    this.stopButton.addEventListener('click', () => this.stop());
  }

  opened() {
    if (!this.nameInput.value) this.nameInput.value = `camera-${Math.random().toString(36).slice(2, 7)}`;
    if (!window.isSecureContext || !navigator.mediaDevices?.getUserMedia) {
      setText(this.message, 'The camera needs a secure page: open the console over HTTPS (--tls-cert), or at http://localhost.');
    }
    this.nameInput.focus();
  }

  mayClose() {
    return !this.camera;  // sharing: the panel shows it
  }

  async start() {
    const id = this.nameInput.value.trim();
    if (!isValidSessionId(id)) {
      setText(this.message, 'Letters, digits and . _ ~ -, up to 128 characters.');
      this.nameInput.focus();
      return;
    }
    if (!navigator.mediaDevices?.getUserMedia) {
      setText(this.message, 'This page cannot use a camera: it needs HTTPS (or http://localhost) and a browser with getUserMedia.');
      return;
    }
    const preferred = new URLSearchParams(location.search).get('encoder') ?? 'auto';
    const encoder = availableEncoder(preferred);
    if (!encoder) {
      setText(this.message, 'This browser has neither WebCodecs nor MediaRecorder to encode the camera.');
      return;
    }
    setText(this.message, '');
    this.startButton.disabled = true;
    try {
      const stream = await navigator.mediaDevices.getUserMedia({
        video: { width: { ideal: TARGET.width }, height: { ideal: TARGET.height }, frameRate: { ideal: TARGET.frameRate } },
        audio: false,
      });
      this.preview.srcObject = stream;
      this.camera = { id, stream, encoder };
      this.retry = { timer: null, delay: 0, since: null };
      await this.startShare();
      this.panel.dataset.sharing = id;
      this.panel.dataset.encoder = encoder;
      this.stopButton.hidden = false;
      this.startButton.hidden = true;
      notify(`Sharing the camera as session ${id} (${encoder === 'webcodecs' ? 'WebCodecs H.264' : 'MediaRecorder WebM'}).`,
        { key: 'camera' });
    } catch (error) {
      this.failed(error);
    } finally {
      this.startButton.disabled = false;
    }
  }

  /** A share of the camera: a new encoder, so its first push starts a stream (a keyframe, or WebM's header). */
  async startShare() {
    const { id, stream, encoder } = this.camera;
    const report = (text) => this.pushed(text);
    const fail = (error) => this.shareFailed(share, error);
    const share = encoder === 'webcodecs' ? new WebCodecsShare(id, stream, report, fail) : new RecorderShare(id, stream, report, fail);
    this.share = share;
    await share.start();
  }

  /** A push went through: a share that was reconnecting is back. */
  pushed(text) {
    setText(this.state, text);
    if (this.retry.delay > 0) {
      this.retry.delay = 0;
      this.retry.since = null;
      setText(this.message, '');
      this.panel.dataset.reconnecting = 'false';
    }
  }

  shareFailed(share, error) {
    if (share !== this.share) return;  // a share already given up reports its last pushes
    // The server went away (a restart, a proxy, the network): share again when it is back, from
    // a new keyframe, rather than leave a phone's camera ended until someone notices. The new
    // share's first push takes over this tab's lost upload (the same publisher), if the server
    // still holds it.
    if (error instanceof ApiError && error.isTransient && this.camera) {
      this.reconnect(share, error);
      return;
    }
    this.failed(error);
  }

  async reconnect(share, error) {
    this.share = null;
    this.retry.since ??= Date.now();
    this.retry.delay = Math.min(Math.max(1000, this.retry.delay * 2), 10_000);
    const seconds = Math.round(this.retry.delay / 1000);
    setText(this.message, `${error.message} Sharing again in ${seconds} s (from a new keyframe).`);
    this.panel.dataset.reconnecting = 'true';
    await share.stop({ keepCamera: true });
    if (!this.camera) return;  // stopped meanwhile
    this.retry.timer = setTimeout(async () => {
      this.retry.timer = null;
      if (!this.camera || this.share) return;
      try {
        await this.startShare();
      } catch (startError) {
        this.failed(startError);
      }
    }, this.retry.delay);
  }

  failed(error) {
    const message = error instanceof ApiError || error instanceof Error ? error.message : String(error);
    setText(this.message, error?.name === 'NotAllowedError'
      ? 'The browser was not allowed to use the camera.'
      : `The camera could not be shared: ${message}`);
    this.stop();
  }

  async stop() {
    const share = this.share;
    const camera = this.camera;
    this.share = null;
    this.camera = null;
    clearTimeout(this.retry.timer);
    this.retry = { timer: null, delay: 0, since: null };
    delete this.panel.dataset.sharing;
    delete this.panel.dataset.reconnecting;
    this.preview.srcObject = null;
    this.stopButton.hidden = true;
    this.startButton.hidden = false;
    setText(this.state, '');
    if (share) {
      await share.stop();
    } else {
      for (const track of camera?.stream.getTracks() ?? []) track.stop();
    }
  }
}

/** WebCodecs: frames from the camera track, H.264 Annex B pieces out, each pushed as it comes. */
class WebCodecsShare {
  constructor(sessionId, stream, report, fail) {
    this.stream = stream;
    this.track = stream.getVideoTracks()[0];
    this.report = report;
    this.fail = fail;
    this.queue = new PushQueue(sessionId, 'video/H264', {
      onError: (error) => fail(error),
      onSent: (queue) => report(`${queue.requests} pushes, ${Math.round(queue.bytesSent / 1024)} KiB`),
    });
    this.frames = 0;
    this.stopped = false;
  }

  async start() {
    const settings = this.track.getSettings();
    // Even sizes: 4:2:0 needs them.
    const width = (settings.width ?? TARGET.width) & ~1;
    const height = (settings.height ?? TARGET.height) & ~1;
    const base = {
      width, height, bitrate: TARGET.bitrate, framerate: settings.frameRate ?? TARGET.frameRate,
      latencyMode: 'realtime', avc: { format: 'annexb' },
    };
    let config = null;
    for (const codec of AVC_CODECS) {
      const candidate = { ...base, codec };
      // eslint-disable-next-line no-await-in-loop
      if ((await VideoEncoder.isConfigSupported(candidate)).supported) {
        config = candidate;
        break;
      }
    }
    if (!config) throw new Error(`this browser cannot encode H.264 at ${width}×${height}`);
    this.encoder = new VideoEncoder({
      output: (chunk) => {
        const bytes = new Uint8Array(chunk.byteLength);
        chunk.copyTo(bytes);
        this.queue.add(bytes);
      },
      error: (error) => this.fail(error),
    });
    this.encoder.configure(config);
    if (typeof MediaStreamTrackProcessor === 'function') {
      this.pump(new MediaStreamTrackProcessor({ track: this.track }).readable.getReader());
    } else {
      this.pumpVideo(width, height);
    }
  }

  encode(frame) {
    // A full encoder queue means the machine cannot keep up: drop a picture rather than lag.
    if (this.encoder.state === 'configured' && this.encoder.encodeQueueSize < 4) {
      this.encoder.encode(frame, { keyFrame: this.frames % TARGET.keyframeEvery === 0 });
      this.frames += 1;
    }
    frame.close();
  }

  async pump(reader) {
    while (!this.stopped) {
      // eslint-disable-next-line no-await-in-loop
      const { value: frame, done } = await reader.read();
      if (done || !frame) break;
      if (this.stopped) {
        frame.close();
        break;
      }
      this.encode(frame);
    }
    reader.releaseLock();
  }

  /** Browsers without MediaStreamTrackProcessor: frames taken from a playing <video>. */
  pumpVideo() {
    const video = document.createElement('video');
    video.muted = true;
    video.playsInline = true;
    video.srcObject = this.stream;
    video.play();
    const next = () => {
      if (this.stopped) return;
      if (video.readyState >= 2) this.encode(new VideoFrame(video, { timestamp: performance.now() * 1000 }));
      if (video.requestVideoFrameCallback) video.requestVideoFrameCallback(next);
      else setTimeout(next, 1000 / TARGET.frameRate);
    };
    next();
  }

  /** `keepCamera`: the camera goes on for the next share (a reconnection). */
  async stop({ keepCamera = false } = {}) {
    this.stopped = true;
    if (!keepCamera) for (const track of this.stream.getTracks()) track.stop();
    try {
      if (this.encoder?.state === 'configured') await this.encoder.flush();
    } catch {
      // Stopping anyway.
    }
    this.encoder?.close();
    await this.queue.finish();
  }
}

/** MediaRecorder: WebM pieces every 200 ms, pushed as they come (the first carries the header). */
class RecorderShare {
  constructor(sessionId, stream, report, fail) {
    this.stream = stream;
    this.report = report;
    this.type = recorderType();
    this.queue = new PushQueue(sessionId, 'video/webm', {
      onError: (error) => fail(error),
      onSent: (queue) => report(`${queue.requests} pushes, ${Math.round(queue.bytesSent / 1024)} KiB`),
    });
  }

  async start() {
    this.recorder = new MediaRecorder(this.stream, { mimeType: this.type, videoBitsPerSecond: TARGET.bitrate });
    this.recorder.addEventListener('dataavailable', (event) => {
      if (event.data.size > 0) this.queue.add(event.data);
    });
    this.recorder.start(200);
  }

  /** `keepCamera`: the camera goes on for the next share (a reconnection). */
  async stop({ keepCamera = false } = {}) {
    if (this.recorder && this.recorder.state !== 'inactive') {
      const stopped = new Promise((resolve) => this.recorder.addEventListener('stop', resolve, { once: true }));
      this.recorder.stop();
      await stopped;
    }
    if (!keepCamera) for (const track of this.stream.getTracks()) track.stop();
    await this.queue.finish();
  }
}
