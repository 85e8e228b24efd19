// The FrameTap console: wires the modules together and routes by the URL hash
// (#/, #/sessions/ID, #/system), so Back and Forward work and every view has a link.

import { authEvents, initAuth } from './auth.js';
import { CameraPanel } from './camera.js';
import { byId, isEditable, setText } from './dom.js';
import { SessionGrid } from './grid.js';
import { SessionView } from './session-view.js';
import { SessionStore } from './store.js';
import { SessionSync } from './sync.js';
import { SystemView } from './system-view.js';
import { PullPanel } from './pull.js';
import { enableDrop, UploadPanel } from './upload.js';

const store = new SessionStore();
const sync = new SessionSync(store);
const grid = new SessionGrid(store);
const sessionView = new SessionView(store);
const systemView = new SystemView(store);
const upload = new UploadPanel(store, sync);
const camera = new CameraPanel(store);
const pull = new PullPanel(store, sync);
// Kept alive for the page's life: sharing goes on while other views are open.
window.frametapConsole = { camera, pull };

const pages = {
  sessions: byId('sessions-page'),
  session: byId('session-page'),
  system: byId('system-page'),
};

let currentRoute = null;
/** True when the previous route was the grid, so Escape can go Back instead of forward. */
let cameFromGrid = false;

export function parseRoute(hash) {
  const path = hash.replace(/^#/, '') || '/';
  const session = /^\/sessions\/([^/]+)$/.exec(path);
  if (session) {
    try {
      return { name: 'session', id: decodeURIComponent(session[1]) };
    } catch {
      return { name: 'sessions' };
    }
  }
  if (path === '/system') return { name: 'system' };
  return { name: 'sessions' };
}

function route() {
  const next = parseRoute(location.hash);
  const previous = currentRoute;
  cameFromGrid = previous?.name === 'sessions';
  currentRoute = next;
  for (const [name, page] of Object.entries(pages)) page.hidden = name !== next.name;
  for (const link of document.querySelectorAll('[data-nav]')) {
    const current = link.dataset.nav === next.name || (link.dataset.nav === 'sessions' && next.name === 'session');
    if (current) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (next.name !== 'session') sessionView.close();
  if (next.name !== 'system') systemView.close();
  if (next.name === 'sessions') {
    document.title = 'Sessions · FrameTap';
    grid.show();
    if (previous?.name === 'session') grid.focusCard(previous.id);
  } else {
    grid.hide();
    upload.stopPreview();  // its picture is on the grid page: no polling for a hidden image
  }
  if (next.name === 'session') {
    document.title = `${next.id} · FrameTap`;
    sessionView.open(next.id);
  } else if (next.name === 'system') {
    document.title = 'System · FrameTap';
    systemView.open();
  }
}

function goBack() {
  if (currentRoute?.name === 'sessions') return;
  if (cameFromGrid) history.back();
  else location.hash = '#/';
}

function showSyncMode() {
  const labels = {
    starting: 'Starting…',
    connecting: 'Connecting…',
    events: 'Live',
    polling: 'Polling every 2 s',
    reconnecting: 'Reconnecting…',
    'signing-in': 'Sign-in needed',
  };
  const state = byId('sync-state');
  setText(state, labels[sync.mode] ?? sync.mode);
  state.dataset.mode = sync.mode;
  state.title = sync.mode === 'polling'
    ? 'This server has no event stream (/events); the page asks for the session list every 2 seconds.'
    : '';
  document.documentElement.dataset.sync = sync.mode;
}

document.addEventListener('keydown', (event) => {
  if (event.key !== 'Escape' || event.defaultPrevented) return;
  if (document.querySelector('dialog[open]') || isEditable(event.target)) return;
  goBack();
});

initAuth();
enableDrop((file) => {
  // Dropped on a session's page: push to that session. The panel lives on the grid page.
  const sessionId = currentRoute?.name === 'session' ? currentRoute.id : null;
  if (currentRoute?.name === 'sessions') {
    upload.open({ file, sessionId });
    return;
  }
  window.addEventListener('hashchange', () => upload.open({ file, sessionId }), { once: true });
  location.hash = '#/';
});
sync.addEventListener('modechange', showSyncMode);
authEvents.addEventListener('signed-in', () => {
  sync.refreshNow();
  sync.updateMode();
});
window.addEventListener('hashchange', route);
showSyncMode();
route();
grid.updateEmptyState();
sync.start();
