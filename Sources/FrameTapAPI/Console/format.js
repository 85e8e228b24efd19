// How numbers and stream facts read for a person. Pure functions, no DOM.

const bytesUnits = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function formatBytes(bytes) {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return '—';
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < bytesUnits.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 2 : 1)} ${bytesUnits[unit]}`;
}

export function formatBitRate(bitsPerSecond) {
  if (bitsPerSecond === null || bitsPerSecond === undefined || !Number.isFinite(bitsPerSecond)) return '—';
  if (bitsPerSecond >= 1e6) return `${(bitsPerSecond / 1e6).toFixed(2)} Mbit/s`;
  if (bitsPerSecond >= 1e3) return `${(bitsPerSecond / 1e3).toFixed(1)} kbit/s`;
  return `${Math.round(bitsPerSecond)} bit/s`;
}

export function formatFps(picturesPerSecond) {
  if (picturesPerSecond === null || picturesPerSecond === undefined || !Number.isFinite(picturesPerSecond)) return '—';
  return `${picturesPerSecond.toFixed(picturesPerSecond >= 100 ? 0 : 1)} fps`;
}

export function formatCount(value) {
  return Number.isFinite(value) ? value.toLocaleString('en') : '—';
}

/** "0.4 s", "12 s", "3 min", "2.5 h": the age of a picture or an event. */
export function formatAge(milliseconds) {
  if (milliseconds === null || milliseconds === undefined || !Number.isFinite(milliseconds)) return '—';
  const seconds = Math.max(0, milliseconds) / 1000;
  if (seconds < 10) return `${seconds.toFixed(1)} s`;
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

export function formatTime(isoDate) {
  const date = new Date(isoDate);
  return Number.isNaN(date.getTime()) ? String(isoDate) : date.toLocaleString();
}

export function formatResolution(format) {
  return format && format.width && format.height ? `${format.width}×${format.height}` : '—';
}

const codecNames = new Map([['h264', 'H.264'], ['h265', 'H.265']]);

/** "H.264", "H.265" for the API's codec names; null when the codec is not known yet. */
export function codecName(codec) {
  if (!codec) return null;
  return codecNames.get(codec) ?? String(codec);
}

/**
 * "H.265 · 320×240 · Main 10 @ L3.1 · 10-bit", the one line a card has room for: codec, size,
 * profile and level, bit depth. `codec` is the session's (known before its format is).
 */
export function formatSummary(format, codec = null) {
  const name = codecName(format?.codec ?? codec);
  if (!format) return name ? `${name} · no picture format yet` : 'no picture format yet';
  const profile = [format.profile, format.level ? `L${format.level}` : null].filter(Boolean).join(' @ ');
  const depth = Number.isFinite(format.bitDepth) ? `${format.bitDepth}-bit` : null;
  return [name, formatResolution(format), profile, depth].filter((part) => part && part !== '—').join(' · ');
}

/**
 * The stream's format as [label, value] rows: the same facts `frametap probe` prints for an
 * SPS (size, crop, profile and level, chroma and bit depth, scan, frame rate, SAR, colour).
 */
export function describeFormat(format) {
  if (!format) return [];
  const rows = [];
  if (format.codec) rows.push(['Codec', codecName(format.codec)]);
  const idcName = format.codec === 'h265' ? 'general_profile_idc' : 'profile_idc';
  rows.push(['Profile', `${format.profile ?? '?'}${format.profileIdc !== undefined ? ` (${idcName} ${format.profileIdc})` : ''}`]);
  if (format.tier) rows.push(['Tier', format.tier]);
  rows.push(['Level', format.level ?? '?']);
  rows.push(['Display size', formatResolution(format)]);
  if (format.codedWidth && format.codedHeight) rows.push(['Coded size', `${format.codedWidth}×${format.codedHeight}`]);
  const crop = format.crop;
  if (crop) {
    const cropped = crop.left || crop.right || crop.top || crop.bottom;
    rows.push(['Crop', cropped ? `left ${crop.left}, right ${crop.right}, top ${crop.top}, bottom ${crop.bottom}` : 'none']);
  }
  if (format.chromaFormat) rows.push(['Chroma', format.chromaFormat]);
  if (format.bitDepth !== undefined) {
    const chroma = format.bitDepthChroma !== undefined && format.bitDepthChroma !== format.bitDepth
      ? `, chroma ${format.bitDepthChroma}-bit` : '';
    rows.push(['Bit depth', `${format.bitDepth}-bit${chroma}`]);
  }
  if (format.interlaced !== undefined) rows.push(['Scan', format.interlaced ? 'interlaced (field or MBAFF coding)' : 'progressive']);
  rows.push(['Frame rate', Number.isFinite(format.frameRate) ? `${format.frameRate.toFixed(3)} fps` : 'not signalled']);
  if ('sampleAspectRatio' in format) rows.push(['Sample aspect ratio', format.sampleAspectRatio ?? 'not signalled']);
  if (format.fullRange !== undefined) rows.push(['Range', format.fullRange ? 'full (0–255)' : 'limited (16–235)']);
  if (format.colorPrimaries) rows.push(['Colour primaries', format.colorPrimaries]);
  if (format.transfer) rows.push(['Transfer', format.transfer]);
  if (format.matrix) rows.push(['Matrix', format.matrix]);
  return rows;
}

const acronyms = new Map([
  ['vaapi', 'VA-API'], ['va', 'VA'], ['h264', 'H.264'], ['h265', 'H.265'], ['hevc', 'HEVC'], ['nal', 'NAL'], ['cuda', 'CUDA'], ['nvdec', 'NVDEC'], ['gpu', 'GPU'],
  ['id', 'ID'], ['ms', 'ms'], ['fps', 'fps'], ['sps', 'SPS'], ['pps', 'PPS'], ['idr', 'IDR'], ['sei', 'SEI'],
  ['aud', 'AUD'], ['uuid', 'UUID'], ['pci', 'PCI'], ['libavcodec', 'libavcodec'], ['vps', 'VPS'], ['rasl', 'RASL'],
]);

/** "maxBodyBytes" -> "Max body bytes", "libavcodecVAAPI" -> "libavcodec VA-API": labels for keys we do not know in advance. */
export function humanizeKey(key) {
  const words = String(key)
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .replace(/[_-]+/g, ' ')
    .split(/\s+/)
    .filter(Boolean)
    .map((word) => acronyms.get(word.toLowerCase()) ?? word.toLowerCase());
  if (words.length === 0) return '';
  const [first, ...rest] = words;
  const capitalised = acronyms.has(first.toLowerCase()) ? first : first[0].toUpperCase() + first.slice(1);
  return [capitalised, ...rest].join(' ');
}
