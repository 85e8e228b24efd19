// Messages for the operator: errors and confirmations that are not tied to one form field.
// One region, announced to screen readers; each message can be dismissed, most go away by
// themselves. A `key` replaces an earlier message with the same key instead of stacking up.

import { byId, h } from './dom.js';

const shown = new Map();

export function notify(message, { kind = 'info', key = null, timeout = kind === 'error' ? 15_000 : 6_000 } = {}) {
  const region = byId('notices');
  if (key && shown.has(key)) shown.get(key).remove();
  const item = h('div', { class: `notice notice-${kind}`, role: kind === 'error' ? 'alert' : 'status' },
    h('span', { class: 'notice-text' }, message),
    h('button', { type: 'button', class: 'notice-dismiss', 'aria-label': 'Dismiss message', on: { click: () => dismiss() } }, '×'));
  const dismiss = () => {
    item.remove();
    if (key && shown.get(key) === item) shown.delete(key);
  };
  if (key) shown.set(key, item);
  region.append(item);
  if (timeout) setTimeout(dismiss, timeout);
  return dismiss;
}
