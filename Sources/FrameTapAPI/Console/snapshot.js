// A snapshot of the session's newest picture at a chosen width, downloaded as a file.

import { apiFetch, sessionPath } from './api.js';
import { h, setText } from './dom.js';

/** The snapshot form: a width (empty for the picture's own size) and a download button. */
export function snapshotForm(id) {
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
