// Copy-ready shell commands for a session: push to it and read from it with ffmpeg, curl and
// ffplay, built from the page's own origin so they name the server the operator is looking at,
// and pushing the session's codec (H.264 until the stream says otherwise).

import { currentToken } from './auth.js';
import { h, setText } from './dom.js';

/**
 * Shell commands for this session, built from the page's own origin. With a token they read it
 * from $FRAMETAP_TOKEN rather than showing it on screen. `codec` is the session's: an H.265
 * session gets an x265 push (Debian's ffmpeg has libx265) and a file push that says it is H.265.
 */
export function sessionCommands(id, origin, withToken, codec = 'h264') {
  const base = `${origin}/sessions/${id}`;
  const curlAuth = withToken ? ' -H "Authorization: Bearer $FRAMETAP_TOKEN"' : '';
  const ffmpegAuth = withToken ? ' -headers "Authorization: Bearer $FRAMETAP_TOKEN"' : '';
  const query = withToken ? '?access_token=$FRAMETAP_TOKEN' : '';
  const quote = withToken ? '"' : "'";
  const pushes = codec === 'h265'
    ? [
      ['Push a live stream (ffmpeg, x265)',
        `ffmpeg -re -i camera.mp4 -c:v libx265 -preset ultrafast -tune zerolatency -f hevc -method POST -chunked_post 1${ffmpegAuth} ${base}/nalus`],
      ['Push a file (curl)', `curl --data-binary @file.265 -H 'Content-Type: video/H265'${curlAuth} '${base}/nalus?flush=true'`],
    ]
    : [
      ['Push a live stream (ffmpeg)', `ffmpeg -re -i camera.264 -c copy -f h264 -method POST -chunked_post 1${ffmpegAuth} ${base}/nalus`],
      ['Push a file (curl)', `curl --data-binary @file.264${curlAuth} '${base}/nalus?flush=true'`],
    ];
  return [
    ...pushes,
    ['Latest picture (curl)', `curl -o latest.jpg${curlAuth} ${base}/frame/latest.jpg`],
    ['320 px thumbnail (curl)', `curl -o thumb.jpg${curlAuth} '${base}/frame/latest.jpg?width=320'`],
    ['Watch (ffplay)', `ffplay -f mpjpeg ${quote}${base}/frames.mjpeg${query}${quote}`],
    ['Save pictures from the stream (ffmpeg)', `ffmpeg -f mpjpeg -i ${quote}${base}/frames.mjpeg${query}${quote} -c copy -f image2 frame-%05d.jpg`],
  ];
}

/**
 * The commands as a list, each with a Copy button; `codec` is the session's, when known;
 * `pushes` false leaves out the push commands (a session that pulls its stream takes none).
 */
export function commandList(id, codec = null, { pushes = true } = {}) {
  const withToken = Boolean(currentToken());
  const commands = sessionCommands(id, location.origin, withToken, codec ?? 'h264')
    .filter(([label]) => pushes || !label.startsWith('Push'));
  const items = commands.map(([label, command], index) => {
    const code = h('code', { id: `command-${index}` }, command);
    const button = h('button', { type: 'button', class: 'copy-button', 'aria-describedby': `command-label-${index}` }, 'Copy');
    button.addEventListener('click', () => copyText(command, code, button));
    return h('li', { class: 'command' },
      h('span', { class: 'command-label', id: `command-label-${index}` }, label),
      h('div', { class: 'command-line' }, h('pre', {}, code), button));
  });
  return h('div', {},
    withToken ? h('p', { class: 'help' }, 'These read the token from $FRAMETAP_TOKEN: export FRAMETAP_TOKEN=… first.') : null,
    h('ul', { class: 'commands' }, items));
}

/** The clipboard API needs a secure context (https or localhost); elsewhere select the text. */
async function copyText(text, codeElement, button) {
  let copied = false;
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      copied = true;
    }
  } catch {
    copied = false;
  }
  if (!copied) {
    const range = document.createRange();
    range.selectNodeContents(codeElement);
    const selection = getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    try {
      copied = document.execCommand('copy');
    } catch {
      copied = false;
    }
  }
  setText(button, copied ? 'Copied' : 'Selected: press Ctrl+C');
  setTimeout(() => setText(button, 'Copy'), 2500);
}
