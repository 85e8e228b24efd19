import Decoding
import Ingest
import Synchronization
import VideoCoding

/// One job of the decode loop, a push or a pull: where its bytes come from, and how it is
/// answered (a push's JSON summary, a multipart answer, or nothing for a pull).
final class IngestJob: Sendable {
    enum Answer: Sendable {
        /// JSON, once the push ended.
        case summary(@Sendable (Result<UploadSummary, SessionError>) -> Void)
        /// One part per picture as the push is decoded.
        case multipart(SpooledUpload)
        /// No answer: a pulled source, read until it is stopped.
        case pull(PullSource<SessionError>)
    }

    /// Where the HTTP server puts the body; nil for a pull.
    let upload: UploadQueue<SessionError>?
    /// What the decode loop reads: `upload` itself, or its spooled replay.
    let source: any IngestSource<SessionError>
    /// End the stream with this push (`?flush=true`).
    let flush: Bool
    /// The codec the push says it carries, if it says.
    let codec: VideoCodec?
    /// Who pushes, if the push says (`?publisher=`).
    let publisher: String?
    let answer: Answer
    /// What this push produced so far; touched on the decode queue only.
    let progress: QueueBound<UploadProgress>
    /// A summary answer is sent once, whoever ends the push first (its last event, or close).
    private let completed = Atomic<Bool>(false)
    /// Its `upload.started` and `upload.ended`: the end goes exactly when the start went.
    let announcement = UploadAnnouncement()
    /// Set, under the decode loop's lock, when a newer push takes the slot over (`?takeover=true`,
    /// or the same publisher's); its upload is refused just after, outside that lock.
    let isTakenOver = Atomic<Bool>(false)
    /// Its end was told to the publisher hold (`DecodeLoop.endPublisherPush`).
    let endedPublisherPush = Atomic<Bool>(false)

    init(
        upload: UploadQueue<SessionError>?, source: any IngestSource<SessionError>, flush: Bool, codec: VideoCodec?,
        publisher: String? = nil, answer: Answer, progress: QueueBound<UploadProgress>
    ) {
        self.upload = upload
        self.source = source
        self.flush = flush
        self.codec = codec
        self.publisher = publisher
        self.answer = answer
        self.progress = progress
    }

    /// Sends a summary answer, once, after `announce` (so a client reacting to its answer
    /// finds the push's end already announced).
    func complete(_ result: Result<UploadSummary, SessionError>, announce: (Result<UploadSummary, SessionError>) -> Void) {
        guard case .summary(let completion) = answer,
            completed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        announce(result)
        completion(result)
    }

    /// A picture decoded from this push: a multipart answer sends them all (damaged ones too, as
    /// the ffmpeg CLI does); a JSON answer only counts them.
    func deliver(_ published: PublishedFrame) {
        if case .multipart(let answer) = answer { answer.add(published) }
    }

    /// A push whose answer is decided: its JSON answer went, or its multipart answer ended. Its
    /// bytes are all read by then.
    var isAnswered: Bool {
        switch answer {
        case .summary: completed.load(ordering: .acquiring)
        case .multipart(let answer): answer.isOver
        case .pull: false
        }
    }

    var isMultipart: Bool {
        if case .multipart = answer { return true }
        return false
    }

    var isPull: Bool {
        if case .pull = answer { return true }
        return false
    }

    func answers(with spooled: SpooledUpload) -> Bool {
        if case .multipart(let answer) = answer { return answer === spooled }
        return false
    }

    /// A push holds the session's upload slot while its body arrives, and a multipart one until
    /// its answer ended too (or it was refused: then no answer follows), unless a newer push took
    /// it over. The client may push again as soon as it was answered.
    var holdsSlot: Bool {
        if isTakenOver.load(ordering: .acquiring) { return false }
        return switch answer {
        case .summary: !(upload?.isProducerDone ?? true)
        case .multipart(let answer): !answer.isOver && !(upload?.isRefused ?? true)
        case .pull: true
        }
    }
}

/// An upload's `upload.started` and `upload.ended`: whether the start went (the events budget
/// admitted it) is decided once, and the end goes once, only when the start went. An end asked
/// for before the start was decided (the session closed meanwhile) waits for it, and so does
/// what must follow the start (the next upload's own start).
final class UploadAnnouncement: Sendable {
    private struct State {
        var startDecided = false
        var startWent = false
        var endDone = false
        var pendingEnd: (@Sendable () -> Void)?
        var pendingDrop: (@Sendable () -> Void)?
        var followers: [@Sendable () -> Void] = []
    }

    private let state = Mutex(State())

    /// Its `upload.started` was published (`went`) or dropped; an end already asked for goes
    /// now, then what waited for the start.
    func startDecided(went: Bool) {
        let (pending, followers) = state.withLock { state -> ((@Sendable () -> Void)?, [@Sendable () -> Void]) in
            state.startDecided = true
            state.startWent = went
            defer {
                state.pendingEnd = nil
                state.pendingDrop = nil
                state.followers = []
            }
            return (went ? state.pendingEnd : state.pendingDrop, state.followers)
        }
        pending?()
        for follower in followers { follower() }
    }

    /// Runs `follower` once its start is decided: now, or when it is.
    func whenStartDecided(_ follower: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if !state.startDecided { state.followers.append(follower) }
            return state.startDecided
        }
        if now { follower() }
    }

    /// Runs `announce` (its `upload.ended`) once, when its start went; `dropped` once instead
    /// when the start was dropped (the end is dropped with it, and counted).
    func announceEnd(_ announce: @escaping @Sendable () -> Void, dropped: @escaping @Sendable () -> Void) {
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.endDone else { return nil }
            state.endDone = true
            guard state.startDecided else {
                state.pendingEnd = announce
                state.pendingDrop = dropped
                return nil
            }
            return state.startWent ? announce : dropped
        }
        action?()
    }
}
