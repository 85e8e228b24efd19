// The page's modal dialogs beyond sign-in (auth.js).

import { byId, setText } from './dom.js';

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
