// A pull session's source as a person reads it: a badge for where the pull stands (live,
// connecting, retrying, failed, idle) and its problem in words. Pure functions, no DOM.

/** What each of the source's error codes means, before the server's own message. */
const problemWords = {
  source_unreachable: 'The source cannot be reached',
  source_timeout: 'The source did not answer in time',
  source_unauthorized: 'The source refused the credentials (tried again every 5 minutes)',
  source_not_found: 'The source has no stream at that path',
  source_failed: 'The source failed',
  source_ended: 'The source ended its stream',
  source_not_allowed: 'The source redirected to a place this server may not pull from',
  unsupported_codec: 'The source sends video FrameTap does not decode',
  no_video_track: 'The source sends no video',
  invalid_container: 'The source sends nothing FrameTap can read',
};

/**
 * Attempts failed in a row from which a waiting pull shows as failed: one failure is a lost
 * connection about to be made again, a second means the source did not come back.
 */
export const FAILED_AFTER = 2;

/** Errors that no retry mends by itself: the pull shows as failed from the first. */
const FAILED_AT_ONCE = new Set(['source_unauthorized', 'source_not_found', 'source_not_allowed']);

/** {text, kind} of the badge for a pull's state (kind: live, pending, warn, error); null for a push session. */
export function pullBadge(source, now = Date.now()) {
  if (!source) return null;
  switch (source.state) {
    case 'live': return { text: 'live', kind: 'live' };
    case 'connecting': return { text: 'connecting', kind: 'pending' };
    // On demand, not connected while nobody asks: not a problem, unless refused credentials
    // keep it from connecting (it waits before the next login, asked for or not).
    case 'idle':
      return Date.parse(source.nextAttemptAt ?? '') > now && FAILED_AT_ONCE.has(source.lastError?.code)
        ? { text: 'failed', kind: 'error' }
        : { text: 'idle', kind: 'pending' };
    case 'retrying':
      return (source.failures ?? 1) >= FAILED_AFTER || FAILED_AT_ONCE.has(source.lastError?.code)
        ? { text: 'failed', kind: 'error' }
        : { text: 'retrying', kind: 'warn' };
    default: return { text: String(source.state ?? 'unknown'), kind: 'pending' };
  }
}

/** "The source cannot be reached: connection refused", from an error record {code, message}. */
export function describeError(error) {
  if (!error) return '';
  const words = problemWords[error.code];
  // The server's messages name what failed ("the source: Connection refused"); the words do.
  const message = (error.message ?? '').replace(/^the source:\s*/i, '').trim();
  if (!words) return message ? `${error.code}: ${message}` : String(error.code);
  return message ? `${words}: ${message}` : words;
}

/**
 * What is wrong with a pull that is not live, in a sentence or two with when it tries again;
 * null while it is live or before anything went wrong. `now`: the wall clock in ms.
 */
export function sourceProblem(source, now = Date.now()) {
  if (!source || source.state === 'live' || !source.lastError) return null;
  if (source.state === 'idle' && !(Date.parse(source.nextAttemptAt ?? '') > now)) return null;
  const problem = `${describeError(source.lastError)}.`;
  if (source.state === 'connecting') return `${problem} Connecting again now.`;
  if (source.state !== 'retrying' && source.state !== 'idle') return problem;
  const due = Date.parse(source.nextAttemptAt ?? '');
  if (!Number.isFinite(due)) return problem;
  const seconds = Math.ceil((due - now) / 1000);
  return seconds > 0 ? `${problem} Next try in ${seconds} s.` : `${problem} Trying again now.`;
}

/**
 * Whether the session's last error is one its pull has recovered from: the pull is live again
 * on a connection made after the error.
 */
export function recoveredFrom(error, source) {
  if (!error || source?.state !== 'live' || !source.connectedAt) return false;
  return Date.parse(error.at) <= Date.parse(source.connectedAt);
}
