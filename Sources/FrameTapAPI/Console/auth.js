// The bearer token: kept in sessionStorage (gone with the tab), sent as a header by fetch and
// XHR, and as ?access_token= where the browser cannot add headers (<img src>, EventSource).
// The sign-in box appears when any call is answered 401, and every caller that needs the token
// waits on the same promise until it is accepted.

import { byId, setText } from './dom.js';

const storageKey = 'frametap.token';

/** Fires `signed-in` and `signed-out`. */
export const authEvents = new EventTarget();

let pendingSignIn = null;

export function currentToken() {
  try {
    return sessionStorage.getItem(storageKey) || null;
  } catch {
    return null;  // storage disabled: the token then lives only as long as this page
  }
}

function storeToken(token) {
  try {
    if (token) sessionStorage.setItem(storageKey, token);
    else sessionStorage.removeItem(storageKey);
  } catch {
    // Nothing to do: without storage a reload asks again.
  }
  byId('sign-out').hidden = !token;
}

export function authHeaders() {
  const token = currentToken();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/** `path` with `access_token` added when signed in (only for GET URLs the browser fetches itself). */
export function withAccessToken(path) {
  const token = currentToken();
  if (!token) return path;
  const url = new URL(path, location.origin);
  url.searchParams.set('access_token', token);
  return url.pathname + url.search;
}

/**
 * Called when the server answered 401: forgets the rejected token, shows the sign-in box (once
 * for any number of callers) and resolves when a token was accepted. `detail`: the server's
 * reason, when the caller has it (an expired JWT says so).
 */
export function signInRequired(detail = '') {
  if (!pendingSignIn) {
    const wasSignedIn = currentToken() !== null;
    storeToken(null);
    // A box that reopens by itself must say why, or it reads as a fault of the page.
    const why = wasSignedIn
      ? `The server no longer accepts the token this page signed in with${detail ? ` (${detail})` : ''}. Sign in again.`
      : '';
    pendingSignIn = new Promise((resolve) => {
      showSignIn(why, () => {
        pendingSignIn = null;
        resolve();
      });
    });
  }
  return pendingSignIn;
}

export function isSigningIn() {
  return pendingSignIn !== null;
}

function showSignIn(why, onAccepted) {
  const dialog = byId('sign-in-dialog');
  const form = byId('sign-in-form');
  const input = byId('sign-in-token');
  const message = byId('sign-in-message');
  const submit = byId('sign-in-submit');
  setText(message, why);
  input.value = '';
  input.removeAttribute('aria-invalid');

  // Nothing works without the token, so the box only closes by signing in.
  const onCancel = (event) => event.preventDefault();
  const onSubmit = async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!token) {
      input.setAttribute('aria-invalid', 'true');
      setText(message, 'Enter the token the server was started with (--auth-token), or an admin JWT.');
      input.focus();
      return;
    }
    submit.disabled = true;
    setText(message, 'Checking…');
    const verdict = await checkToken(token);
    submit.disabled = false;
    if (verdict !== 'accepted') {
      input.setAttribute('aria-invalid', 'true');
      setText(message, verdict);
      input.select();
      return;
    }
    storeToken(token);
    form.removeEventListener('submit', onSubmit);
    dialog.removeEventListener('cancel', onCancel);
    dialog.close();
    authEvents.dispatchEvent(new Event('signed-in'));
    onAccepted();
  };
  form.addEventListener('submit', onSubmit);
  dialog.addEventListener('cancel', onCancel);
  if (!dialog.open) dialog.showModal();
  input.focus();
}

/** 'accepted', or why not, in words. Uses fetch directly: the API client reports 401s here. */
async function checkToken(token) {
  try {
    const response = await fetch('/sessions', { headers: { Authorization: `Bearer ${token}` }, cache: 'no-store' });
    if (response.ok) return 'accepted';
    if (response.status === 401) return 'The server did not accept this token.';
    if (response.status === 403) {
      // A valid token of too narrow a scope: trying again cannot help, another token can.
      const problem = await response.json().catch(() => null);
      const detail = problem && typeof problem.detail === 'string' ? ` (${problem.detail})` : '';
      return `This token is valid but cannot run the console${detail}: it needs an admin token.`;
    }
    return `The server answered ${response.status} ${response.statusText}; try again.`;
  } catch {
    return 'The server cannot be reached; try again in a moment.';
  }
}

export function signOut() {
  storeToken(null);
  authEvents.dispatchEvent(new Event('signed-out'));
}

export function initAuth() {
  byId('sign-out').hidden = !currentToken();
  byId('sign-out').addEventListener('click', () => signOut());
}
