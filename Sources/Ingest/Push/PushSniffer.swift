import Containers
import Synchronization
import VideoCoding

/// What a push says it carries: its Content-Type names a container or a codec's elementary
/// stream, or says nothing (then its first bytes tell, `Sniffer`).
public enum PushContent: Sendable, Equatable {
    case container(ContainerFormat)
    case elementaryStream
}

/// A push as the decode loop reads it, once it is known what the push carries: Annex B bytes
/// straight through, or a container's samples through the session's `ContainerStream`.
///
/// The push's Content-Type says which (`PushContent`); without one, its first bytes do
/// (`Sniffer`). A
/// container push continues the session's open container stream when it is the same container
/// and does not start a new file; a push of anything else first ends the open stream (its
/// last samples are decoded before this push's bytes). Read on the decode queue only.
public final class PushSniffer<Failure: IngestFailure>: IngestSource {
    private let upload: any IngestSource<Failure>
    private let declared: PushContent?
    private let flush: Bool
    private let slot: ContainerStreamSlot<Failure>
    private let startStream: @Sendable (ContainerFormat) -> ContainerStream<Failure>
    /// An open stream that ended with an error between pushes: the session records it.
    private let streamFailed: @Sendable (ContainerError) -> Void
    /// The push's refusal: its client is answered now.
    private let refuse: @Sendable (Failure) -> Void
    private let state: Mutex<State>

    private enum Route {
        /// Reading the first bytes to tell what the push is.
        case undecided(prefix: [UInt8], receivedAt: UInt64)
        /// An open stream drains before this push's own route.
        case closing(ContainerStream<Failure>, then: Next)
        case elementary(prefix: [UInt8], receivedAt: UInt64)
        case container(ContainerStream<Failure>)
        /// The push was refused before a byte of it was read on: this event, then nothing.
        case refused(IngestEvent<Failure>)
        case finished
    }

    private enum Next {
        case elementary(prefix: [UInt8], receivedAt: UInt64)
        case container(ContainerFormat, prefix: [UInt8], receivedAt: UInt64)
        /// The push ended (or broke off) before any byte: this event is its end.
        case event(IngestEvent<Failure>)
    }

    private struct State {
        var route: Route = .undecided(prefix: [], receivedAt: 0)
        var wake: (@Sendable () -> Void)?
        /// The push's own terminal event, read while deciding.
        var ended: IngestEvent<Failure>?
    }

    public init(
        upload: any IngestSource<Failure>, declared: PushContent?, flush: Bool, slot: ContainerStreamSlot<Failure>,
        startStream: @escaping @Sendable (ContainerFormat) -> ContainerStream<Failure>,
        streamFailed: @escaping @Sendable (ContainerError) -> Void, refuse: @escaping @Sendable (Failure) -> Void
    ) {
        self.upload = upload
        self.declared = declared
        self.flush = flush
        self.slot = slot
        self.startStream = startStream
        self.streamFailed = streamFailed
        self.refuse = refuse
        state = Mutex(State())
    }

    public var totalBytes: Int { upload.totalBytes }

    public func setConsumerWake(_ wake: @escaping @Sendable () -> Void) {
        state.withLock { $0.wake = wake }
        upload.setConsumerWake(wake)
    }

    public func close() {
        upload.close()
    }

    public func next() -> IngestEvent<Failure>? {
        while true {
            let route = state.withLock { $0.route }
            switch route {
            case .finished:
                return nil
            case .refused(let event):
                setRoute(.finished)
                return event
            case .undecided(let prefix, let receivedAt):
                guard let decided = decide(prefix: prefix, receivedAt: receivedAt) else { return nil }
                setRoute(decided)
            case .elementary(let prefix, let receivedAt):
                if !prefix.isEmpty {
                    setRoute(.elementary(prefix: [], receivedAt: 0))
                    return .bytes(SlabBytes(prefix), receivedAt: receivedAt)
                }
                if let ended = state.withLock({ $0.ended }) {
                    setRoute(.finished)
                    return ended
                }
                let event = upload.next()
                if case .end = event { setRoute(.finished) }
                if case .stopped = event { setRoute(.finished) }
                return event
            case .closing(let stream, let then):
                guard let output = stream.outputs.take() else { return nil }
                switch output {
                case .sample(let sample, let receivedAt):
                    return .sample(sample, receivedAt: receivedAt)
                case .bytes(let bytes, let receivedAt):
                    return .bytes(bytes, receivedAt: receivedAt)
                case .pushEnded, .streamBreak:
                    continue
                case .ended(let error):
                    slot.clear(stream)
                    if let error { streamFailed(error) }
                    switch then {
                    case .elementary(let prefix, let receivedAt):
                        setRoute(.elementary(prefix: prefix, receivedAt: receivedAt))
                    case .container(let format, let prefix, let receivedAt):
                        setRoute(.container(open(format, prefix: prefix, receivedAt: receivedAt)))
                    case .event(let event):
                        setRoute(.finished)
                        return event
                    }
                }
            case .container(let stream):
                guard let output = stream.outputs.take() else {
                    // A spooled push hands out bytes only while its answer wants pictures.
                    stream.feed.poke()
                    return nil
                }
                switch output {
                case .sample(let sample, let receivedAt):
                    return .sample(sample, receivedAt: receivedAt)
                case .bytes(let bytes, let receivedAt):
                    return .bytes(bytes, receivedAt: receivedAt)
                case .streamBreak:
                    continue
                case .pushEnded:
                    setRoute(.finished)
                    return .end
                case .ended(let error):
                    slot.clear(stream)
                    setRoute(.finished)
                    // A push that broke off or was refused (its codec) cut the container there:
                    // its answer is why it stopped, not what the demuxer made of the cut.
                    if case .stopped = stream.feed.finalOutcome { return stream.feed.finalOutcome }
                    if let error {
                        let refusal = Failure(error)
                        refuse(refusal)
                        return .stopped(.refused(refusal))
                    }
                    return stream.feed.finalOutcome ?? .end
                }
            }
        }
    }

    private func setRoute(_ route: Route) {
        state.withLock { $0.route = route }
    }

    /// Reads the push's first bytes until it is clear what they are, then picks the route.
    private func decide(prefix: [UInt8], receivedAt: UInt64) -> Route? {
        var prefix = prefix
        var receivedAt = receivedAt
        var ended = state.withLock { $0.ended }
        func settled() -> Bool {
            if ended != nil { return true }
            // A declared push needs its first bytes too: do they start a new file, and do they
            // say what the declaration says (`contradiction`)? An Annex B start code settles it at
            // once; only bytes that may begin MPEG-TS wait for its second sync byte.
            return Sniffer.sniff(prefix[...], complete: false) != .needMoreBytes
        }
        while !settled() {
            guard let event = upload.next() else {
                setRoute(.undecided(prefix: prefix, receivedAt: receivedAt))
                return nil
            }
            switch event {
            case .bytes(let bytes, let at):
                prefix += bytes
                receivedAt = at
            case .end, .stopped:
                ended = event
            case .sample, .streamBreak:
                break  // an upload has neither
            }
        }
        state.withLock { $0.ended = ended }
        // Annex B said to be a container contradicts it only when the push does not go on with
        // an open stream of it: a piece of a container may begin with a length that reads as a
        // start code.
        let continuing =
            if case .container(let format)? = declared, let open = slot.current { !open.hasFinished && open.format == format } else { false }
        if let declared,
            let contradiction = Self.contradiction(declared, prefix: prefix[...], complete: ended != nil)
                ?? (continuing ? nil : Self.elementaryStreamContradiction(declared, prefix: prefix[...]))
        {
            let refusal = Failure(IngestError(.contentTypeMismatch, contradiction))
            refuse(refusal)
            return .refused(.stopped(.refused(refusal)))
        }
        let content: PushContent
        if let declared {
            content = declared
        } else if case .container(let format) = Sniffer.sniff(prefix[...], complete: ended != nil) {
            content = .container(format)
        } else {
            content = .elementaryStream
        }
        let open = slot.current
        let continuable = open.map { !$0.hasFinished } ?? false
        switch content {
        case .container(let format):
            if let open, continuable, open.format == format, !format.startsNewFile(prefix[...]) {
                return continueStream(open, prefix: prefix, receivedAt: receivedAt)
            }
            if let box = format.continuationBox(prefix[...]) {
                // No MP4 stream under way to go on with (none, one that ended, or another container's).
                let refusal = Failure(
                    ContainerError(
                        .invalidContainer,
                        "this push begins with an MP4 \(box) box, which goes on with an MP4 stream under way, and none is: "
                            + "it ended (a flush, a push of something else, or a push that broke off). Send the init "
                            + "segment (ftyp and moov) first, in this push or the one before"))
                refuse(refusal)
                // A push of something else ends an open stream (its last samples come first).
                if let open { return close(open, then: .event(.stopped(.refused(refusal)))) }
                return .refused(.stopped(.refused(refusal)))
            }
            if let open {
                let then: Next =
                    if let ended, prefix.isEmpty { .event(ended) } else { .container(format, prefix: prefix, receivedAt: receivedAt) }
                return close(open, then: then)
            }
            if prefix.isEmpty, ended != nil { return .elementary(prefix: [], receivedAt: receivedAt) }
            return .container(self.open(format, prefix: prefix, receivedAt: receivedAt))
        case .elementaryStream:
            let startsWithStartCode = prefix.starts(with: [0, 0, 1]) || prefix.starts(with: [0, 0, 0, 1])
            if let open, continuable, prefix.isEmpty || (declared == nil && !startsWithStartCode) {
                // An empty push (a flush) ends the open stream's push as any would; bytes of no
                // known kind are more of it (a WebM recorder's next piece, sent without its
                // Content-Type).
                return continueStream(open, prefix: prefix, receivedAt: receivedAt)
            }
            if let open { return close(open, then: .elementary(prefix: prefix, receivedAt: receivedAt)) }
            return .elementary(prefix: prefix, receivedAt: receivedAt)
        }
    }

    /// Why the push's first bytes contradict its Content-Type, when they plainly do: they begin a
    /// file of another container (an `ftyp` box, an EBML or FLV header, MPEG-TS sync bytes 188
    /// apart). Bytes that begin nothing known (a piece of a container sent in several pushes)
    /// contradict nothing.
    static func contradiction(_ declared: PushContent, prefix: ArraySlice<UInt8>, complete: Bool) -> String? {
        guard case .container(let found) = Sniffer.sniff(prefix, complete: complete),
            found.startsNewFile(prefix) || (found == .mpegTS && Self.holdsThreeSyncBytes(prefix))
        else { return nil }
        let said: String
        switch declared {
        case .elementaryStream: said = "an H.264 or H.265 elementary stream"
        case .container(let format) where format != found: said = format.displayName
        case .container: return nil
        }
        return "the push's Content-Type says \(said), but its bytes are \(found.displayName): send it as "
            + "\(found.mediaType), or without a Content-Type (the first bytes tell)"
    }

    /// Why a push said to be a container contradicts it, when its first bytes plainly begin an
    /// H.264 or H.265 elementary stream: a start code, then an access unit delimiter or a
    /// sequence (or video) parameter set whose first bytes are what the codec writes there.
    static func elementaryStreamContradiction(_ declared: PushContent, prefix: ArraySlice<UInt8>) -> String? {
        // Bytes that begin a known container box (an MP4 box of 256 to 511 bytes reads as a
        // start code) are that container's.
        guard case .container(let format) = declared, case .elementaryStream = Sniffer.sniff(prefix, complete: false) else {
            return nil
        }
        let start = prefix.starts(with: [0, 0, 0, 1]) ? 4 : prefix.starts(with: [0, 0, 1]) ? 3 : nil
        guard let start, prefix.count >= start + 3 else { return nil }
        let header = prefix[prefix.startIndex + start]
        let next = prefix[prefix.startIndex + start + 1]
        let codec: (name: String, mediaType: String)?
        // H.264: an AUD (its header byte is 9 exactly, its payload byte a picture type and the
        // stop bit), or an SPS (7) of a profile H.264 defines.
        let h264Profiles: Set<UInt8> = [66, 77, 88, 100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135]
        // H.265: forbidden bit clear, layer 0 and temporal id 1 (the second byte is 1); a VPS
        // (32), an SPS (33) or an AUD (35).
        if header & 0x80 == 0, next == 1, [32, 33, 35].contains(header >> 1) {
            codec = ("H.265", "video/H265")
        } else if (header == 0x09 && next & 0x1F == 0x10) || (header & 0x80 == 0 && header & 0x1F == 7 && h264Profiles.contains(next)) {
            codec = ("H.264", "video/H264")
        } else {
            codec = nil
        }
        guard let codec else { return nil }
        return "the push's Content-Type says \(format.displayName), but its bytes are an \(codec.name) elementary stream "
            + "(Annex B): send it as \(codec.mediaType), or without a Content-Type (the first bytes tell)"
    }

    /// MPEG-TS sync bytes at 0, 188 and 376: the sniffer's two are one chance in 65,536 for the
    /// arbitrary bytes a piece of another container may begin with, too many to refuse a push on.
    private static func holdsThreeSyncBytes(_ prefix: ArraySlice<UInt8>) -> Bool {
        prefix.count > 376 && [0, 188, 376].allSatisfy { prefix[prefix.startIndex + $0] == 0x47 }
    }

    /// Ends the open stream's input; its last samples come before what `then` says.
    private func close(_ stream: ContainerStream<Failure>, then: Next) -> Route {
        stream.feed.endInput()
        if let wake = state.withLock({ $0.wake }) { stream.outputs.setConsumerWake(wake) }
        return .closing(stream, then: then)
    }

    /// This push's bytes go on in the open stream.
    private func continueStream(_ stream: ContainerStream<Failure>, prefix: [UInt8], receivedAt: UInt64) -> Route {
        let ended = state.withLock { state -> IngestEvent<Failure>? in
            defer { state.ended = nil }
            return state.ended
        }
        let source: any IngestSource<Failure> = ended.map { PrefixedSource(prefix: prefix, receivedAt: receivedAt, end: $0) } ?? upload
        stream.feed.attach(source, prefix: ended == nil ? prefix : [], receivedAt: receivedAt, endsStream: flush)
        if let wake = state.withLock({ $0.wake }) { stream.outputs.setConsumerWake(wake) }
        return .container(stream)
    }

    /// Starts a container stream with this push's bytes.
    private func open(_ format: ContainerFormat, prefix: [UInt8], receivedAt: UInt64) -> ContainerStream<Failure> {
        let stream = startStream(format)
        slot.current = stream
        _ = continueStream(stream, prefix: prefix, receivedAt: receivedAt)
        return stream
    }
}

/// A push already read to its end while its first bytes were examined: those bytes, then its end.
final class PrefixedSource<Failure: IngestFailure>: IngestSource {
    private let state: Mutex<(prefix: [UInt8]?, end: IngestEvent<Failure>?)>
    private let receivedAt: UInt64
    let totalBytes: Int

    init(prefix: [UInt8], receivedAt: UInt64, end: IngestEvent<Failure>) {
        state = Mutex((prefix.isEmpty ? nil : prefix, end))
        self.receivedAt = receivedAt
        totalBytes = prefix.count
    }

    func next() -> IngestEvent<Failure>? {
        state.withLock { state in
            if let prefix = state.prefix {
                state.prefix = nil
                return .bytes(SlabBytes(prefix), receivedAt: receivedAt)
            }
            defer { state.end = nil }
            return state.end
        }
    }

    func setConsumerWake(_ wake: @escaping @Sendable () -> Void) { wake() }
    func close() {}
}
