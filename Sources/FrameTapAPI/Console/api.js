// The FrameTap HTTP API as the console uses it. Every call carries the token; every failure
// becomes an ApiError whose message is readable (the problem's detail or title, never raw JSON).

import { authHeaders, signInRequired } from './auth.js';

export class ApiError extends Error {
  /**
   * `status` is 0 when no answer came (network down, server restarting); `code` is the
   * problem's stable code (e.g. `session_not_found`) or `network`; `detail` the problem's own
   * words, empty when it had none.
   */
  constructor(message, { status = 0, code = 'network', title = '', detail = '' } = {}) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.title = title;
    this.detail = detail;
  }

  /** No answer, or one from a server (or proxy) that is restarting or overloaded: worth retrying. */
  get isTransient() {
    return this.status === 0 || this.status === 502 || this.status === 503 || this.status === 504;
  }
}

export function sessionPath(id, suffix = '') {
  return `/sessions/${encodeURIComponent(id)}${suffix}`;
}

/** Session ids the server accepts (openapi.yaml's SessionId), minus the two that are path dots. */
export function isValidSessionId(id) {
  return /^[A-Za-z0-9._~-]{1,128}$/.test(id) && id !== '.' && id !== '..';
}

/**
 * fetch with the token. Resolves with the Response for 2xx, 304 and the statuses in `allow`;
 * otherwise rejects with an ApiError. A 401 also opens the sign-in box.
 */
export async function apiFetch(path, { method = 'GET', body, headers = {}, signal, allow = [] } = {}) {
  let response;
  try {
    response = await fetch(path, { method, body, signal, cache: 'no-store', headers: { ...authHeaders(), ...headers } });
  } catch (error) {
    if (error?.name === 'AbortError') throw error;
    throw new ApiError('The server cannot be reached.');
  }
  if (response.ok || response.status === 304 || allow.includes(response.status)) return response;
  const problem = await readProblem(response.status, response.statusText, response.headers.get('Content-Type'),
    () => response.text());
  if (problem.status === 401) signInRequired(problem.detail);
  throw problem;
}

export async function getJSON(path, options = {}) {
  const response = await apiFetch(path, options);
  return response.json();
}

export const api = {
  listSessions: (options) => getJSON('/sessions', options).then((list) => list.sessions ?? []),
  session: (id, options) => getJSON(sessionPath(id), options),
  system: (options) => getJSON('/system', options),
  deleteSession: (id) => apiFetch(sessionPath(id), { method: 'DELETE' }),
  /** Ends a pull session's back-off: it connects now. Resolves with the session's status. */
  retrySource: (id) => apiFetch(sessionPath(id, '/source/retry'), { method: 'POST' }).then((response) => response.json()),
};

/** An ApiError from an error answer: the problem's detail, else its title, else the status line. */
async function readProblem(status, statusText, contentType, readBody) {
  let problem = null;
  if (contentType && /json/i.test(contentType)) {
    try {
      problem = JSON.parse(await readBody());
    } catch {
      problem = null;
    }
  }
  const fallback = status === 401 ? 'Sign-in required.' : `The server answered ${status}${statusText ? ` ${statusText}` : ''}.`;
  const message = problem?.detail || problem?.title || fallback;
  return new ApiError(message, {
    status, code: problem?.code ?? `http_${status}`, title: problem?.title ?? '',
    detail: typeof problem?.detail === 'string' ? problem.detail : '',
  });
}

/**
 * The media type a stream file's name says (RFC 6184 video/H264, RFC 7798 video/H265), which
 * tells the server its codec: a file of the other codec is refused (415) rather than decoded.
 * Other names say nothing (application/octet-stream): the server detects the codec.
 */
export function streamContentType(fileName) {
  const extension = /\.([^.]+)$/.exec(fileName)?.[1]?.toLowerCase();
  if (['265', 'h265', 'hevc'].includes(extension)) return 'video/H265';
  if (['264', 'h264', 'avc', 'jsv'].includes(extension)) return 'video/H264';
  return 'application/octet-stream';
}

/**
 * POSTs a file to a session with XMLHttpRequest, whose upload progress events are what Chromium
 * offers for a request body (fetch has none). Resolves with the push summary; rejects with an
 * ApiError (a 401 also opens the sign-in box) or an AbortError when `signal` aborts.
 */
export function uploadFile(id, file, { flush = true, onProgress = () => {}, signal } = {}) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', sessionPath(id, `/nalus${flush ? '?flush=true' : ''}`));
    for (const [name, value] of Object.entries(authHeaders())) xhr.setRequestHeader(name, value);
    xhr.setRequestHeader('Content-Type', streamContentType(file.name ?? ''));
    xhr.responseType = 'text';
    xhr.upload.addEventListener('progress', (event) => {
      onProgress(event.loaded, event.lengthComputable ? event.total : file.size);
    });
    xhr.upload.addEventListener('load', () => onProgress(file.size, file.size, { sent: true }));
    xhr.addEventListener('load', async () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        try {
          resolve(JSON.parse(xhr.responseText));
        } catch {
          reject(new ApiError('The server answered the push with something that is not JSON.', { status: xhr.status, code: 'bad_answer' }));
        }
        return;
      }
      const problem = await readProblem(xhr.status, xhr.statusText, xhr.getResponseHeader('Content-Type'),
        async () => xhr.responseText);
      if (problem.status === 401) signInRequired(problem.detail);
      reject(problem);
    });
    xhr.addEventListener('error', () => reject(new ApiError('The upload failed: the connection to the server was lost.')));
    xhr.addEventListener('abort', () => reject(new DOMException('Upload cancelled', 'AbortError')));
    signal?.addEventListener('abort', () => xhr.abort(), { once: true });
    xhr.send(file);
  });
}
