// Who keeps a session, from its status' origin and persisted: declared in the configuration
// file, kept in the state directory, or held by this process only.

import { setText } from './dom.js';

/** The badge's words and title, or null for a session only this process holds. */
export function describeStanding(status) {
  if (status.origin === 'declared') {
    return { label: 'declared', title: 'Declared in the configuration file: edit the file to change or remove it' };
  }
  if (status.persisted) {
    return { label: 'kept', title: 'Made by PUT and kept in the state directory: it comes back after a restart' };
  }
  return null;
}

/** Shows `badge` with the session's standing, or hides it. */
export function showStanding(badge, status) {
  const standing = describeStanding(status);
  badge.hidden = !standing;
  if (standing) {
    setText(badge, standing.label);
    badge.title = standing.title;
  }
}

/** The status row saying who keeps the session, and so what removes it. */
export function describeKeeper(status) {
  if (status.origin === 'declared') return 'the configuration file: it stays until the file no longer declares it';
  if (status.persisted) return 'the state directory (made by PUT): it comes back after a restart, until it is deleted';
  return 'this process only: removed after the idle timeout, or at a restart';
}
