// Small time-series charts drawn as inline SVG: a line and its area over a fixed window,
// scaled to a rounded maximum. The numbers are HTML next to the drawing, so they stay crisp
// and readable at any width while the drawing stretches.

import { h, svg, setText } from './dom.js';

const WIDTH = 300;
const HEIGHT = 80;

/** 1, 2, 2.5, 5 times a power of ten: the smallest such number not below `value`. */
export function niceCeiling(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (value <= step * power) return step * power;
  }
  return 10 * power;
}

export class TimeChart {
  /** `format` turns a value into text ("25.0 fps"); `windowMs` is the span shown, ending now. */
  constructor({ title, format, windowMs }) {
    this.title = title;
    this.format = format;
    this.windowMs = windowMs;
    this.area = svg('path', { class: 'chart-area' });
    this.line = svg('polyline', { class: 'chart-line', fill: 'none' });
    this.drawing = svg('svg', {
      class: 'chart-drawing', viewBox: `0 0 ${WIDTH} ${HEIGHT}`, preserveAspectRatio: 'none', 'aria-hidden': 'true',
      focusable: 'false',
    },
    svg('line', { class: 'chart-grid', x1: 0, x2: WIDTH, y1: HEIGHT / 2, y2: HEIGHT / 2 }),
    this.area, this.line);
    this.current = h('span', { class: 'chart-current' }, '—');
    this.maximum = h('span', { class: 'chart-max' }, '');
    this.element = h('figure', { class: 'chart', role: 'img', 'aria-label': title },
      h('figcaption', {}, h('span', { class: 'chart-title' }, title), this.current),
      h('div', { class: 'chart-plot' }, this.maximum, this.drawing),
      h('div', { class: 'chart-axis', 'aria-hidden': 'true' },
        h('span', {}, `${Math.round(windowMs / 60000)} min ago`), h('span', {}, 'now')));
  }

  /** `points`: [{t, v}] with t from performance.now(), oldest first. */
  update(points, now = performance.now()) {
    const start = now - this.windowMs;
    const visible = points.filter((point) => point.t >= start && Number.isFinite(point.v));
    const latest = visible.at(-1);
    const top = niceCeiling(Math.max(0, ...visible.map((point) => point.v)));
    setText(this.current, latest ? this.format(latest.v) : '—');
    setText(this.maximum, visible.length ? `max ${this.format(top)}` : 'no samples yet');
    this.element.setAttribute('aria-label',
      `${this.title} over the last ${Math.round(this.windowMs / 60000)} minutes: ${latest ? `now ${this.format(latest.v)}` : 'no samples yet'}`);
    const coordinates = visible.map((point) => [
      ((point.t - start) / this.windowMs) * WIDTH,
      HEIGHT - (point.v / top) * (HEIGHT - 4),
    ]);
    const text = coordinates.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ');
    this.line.setAttribute('points', text);
    this.element.dataset.points = String(coordinates.length);
    if (coordinates.length >= 2) {
      const [firstX] = coordinates[0];
      const [lastX] = coordinates.at(-1);
      this.area.setAttribute('d', `M${firstX.toFixed(1)},${HEIGHT} L${text.replaceAll(' ', ' L')} L${lastX.toFixed(1)},${HEIGHT} Z`);
    } else {
      this.area.setAttribute('d', '');
    }
  }
}
