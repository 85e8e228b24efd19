// Small DOM helpers. The console builds its markup with these, never from HTML strings, so text
// from the server (session ids, error messages) can never become markup.

const SVG_NS = 'http://www.w3.org/2000/svg';

/**
 * Creates an HTML element. `attributes` may hold `class`, `dataset` (an object), `on` (event
 * name -> listener), boolean attributes (true adds them, false/null/undefined leaves them out)
 * and any other attribute as a string. Children are nodes or strings (as text).
 */
export function h(tag, attributes = {}, ...children) {
  return build(document.createElement(tag), attributes, children);
}

/** Like `h` for SVG elements. */
export function svg(tag, attributes = {}, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attributes, children);
}

function build(element, attributes, children) {
  for (const [name, value] of Object.entries(attributes ?? {})) {
    if (value === false || value === null || value === undefined) continue;
    if (name === 'dataset') {
      Object.assign(element.dataset, value);
    } else if (name === 'on') {
      for (const [event, listener] of Object.entries(value)) element.addEventListener(event, listener);
    } else {
      element.setAttribute(name, value === true ? '' : String(value));
    }
  }
  element.append(...children.flat().filter((child) => child !== null && child !== undefined && child !== false));
  return element;
}

export function byId(id) {
  const element = document.getElementById(id);
  if (!element) throw new Error(`the page has no #${id}`);
  return element;
}

/**
 * A panel of the sessions page that its toggle button (`#open-NAME`) opens and closes, and its
 * own button (`#NAME-close`) closes: the toggle's `aria-expanded` follows the panel, and focus
 * goes back to the toggle on closing. A panel that extends it says what opening does
 * (`opened`, given what `open` was given), whether it may close now (`mayClose`: not while it
 * shows work under way) and what closing stops (`closed`).
 */
export class DisclosurePanel {
  constructor(name) {
    this.panel = byId(`${name}-panel`);
    this.toggle = byId(`open-${name}`);
    this.toggle.addEventListener('click', () => (this.panel.hidden ? this.open() : this.close()));
    byId(`${name}-close`).addEventListener('click', () => this.close());
  }

  open(...given) {
    this.panel.hidden = false;
    this.toggle.setAttribute('aria-expanded', 'true');
    this.opened(...given);
  }

  close() {
    if (!this.mayClose()) return;
    this.panel.hidden = true;
    this.toggle.setAttribute('aria-expanded', 'false');
    this.closed();
    this.toggle.focus();
  }

  opened() {}

  mayClose() {
    return true;
  }

  closed() {}
}

/** Sets an element's text only when it changed, so screen readers and selections are not disturbed. */
export function setText(element, text) {
  const value = String(text);
  if (element.textContent !== value) element.textContent = value;
}

/** A definition list from [term, description] pairs; a description may be a node. */
export function definitionList(rows, className = 'facts') {
  return h('dl', { class: className },
    rows.map(([term, description]) => h('div', {}, h('dt', {}, term), h('dd', {}, description))));
}

/**
 * Shows [term, description] rows in `container`, updating the texts in place when the terms
 * are the same as last time (a view refreshed every second keeps selections and focus).
 */
export function renderFacts(container, rows) {
  const list = container.firstElementChild;
  const terms = list?.tagName === 'DL' ? [...list.querySelectorAll(':scope > div > dt')] : [];
  const sameTerms = terms.length === rows.length && rows.every(([term], index) => terms[index].textContent === term);
  if (!sameTerms || rows.some(([, description]) => description instanceof Node)) {
    container.replaceChildren(definitionList(rows));
    return;
  }
  const descriptions = list.querySelectorAll(':scope > div > dd');
  rows.forEach(([, description], index) => setText(descriptions[index], description));
}

/** True when keyboard input in `element` is text entry, where shortcuts must not fire. */
export function isEditable(element) {
  if (!(element instanceof HTMLElement)) return false;
  if (element.isContentEditable) return true;
  if (element instanceof HTMLTextAreaElement || element instanceof HTMLSelectElement) return true;
  // A slider takes the arrow keys but no text: Escape still goes back from it.
  return element instanceof HTMLInputElement
    && !['button', 'checkbox', 'radio', 'submit', 'reset', 'file', 'range'].includes(element.type);
}
