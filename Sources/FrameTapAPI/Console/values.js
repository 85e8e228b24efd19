// JSON the console does not know in advance (device lists the server adds, new status members)
// drawn generically: scalars as text with units guessed from the key, lists of objects as
// tables, objects as fact lists.

import { definitionList, h } from './dom.js';
import { formatBytes, formatCount, humanizeKey } from './format.js';

/** A JSON value as text or nodes; `key` hints at units (…Bytes, …Milliseconds, …Seconds). */
export function renderValue(value, key = '') {
  if (value === null || value === undefined) return key === 'maxBodyBytes' ? 'unlimited' : '—';
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (typeof value === 'number') {
    if (/bytes$/i.test(key)) return `${formatBytes(value)} (${formatCount(value)} B)`;
    if (/milliseconds$|ms$/i.test(key)) return `${formatCount(value)} ms`;
    if (/seconds$/i.test(key)) return `${formatCount(value)} s`;
    return formatCount(value);
  }
  if (typeof value === 'string') return value === '' ? '—' : value;
  if (Array.isArray(value)) {
    if (value.length === 0) return 'none';
    if (value.every((item) => item === null || typeof item !== 'object')) return value.map((item) => renderValue(item)).join(', ');
    if (value.every((item) => item && typeof item === 'object' && !Array.isArray(item))) return objectTable(value);
    return h('ul', {}, value.map((item) => h('li', {}, renderValue(item))));
  }
  return definitionList(Object.entries(value).map(([name, item]) => [humanizeKey(name), renderValue(item, name)]));
}

/** A table whose columns are every key of every row, in first-seen order. */
function objectTable(rows) {
  const columns = [];
  for (const row of rows) for (const key of Object.keys(row)) if (!columns.includes(key)) columns.push(key);
  return h('div', { class: 'table-scroll' },
    h('table', {},
      h('thead', {}, h('tr', {}, columns.map((column) => h('th', { scope: 'col' }, humanizeKey(column))))),
      h('tbody', {}, rows.map((row) => h('tr', {}, columns.map((column) =>
        h('td', typeof row[column] === 'number' ? { class: 'number' } : {}, renderValue(row[column], column))))))));
}

export function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** A non-empty list whose items are all objects: drawn as a table. */
export function isObjectList(value) {
  return Array.isArray(value) && value.length > 0 && value.every(isObject);
}
