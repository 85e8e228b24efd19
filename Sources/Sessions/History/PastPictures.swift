import Decoding
import Dispatch
import FoundationEssentials

/// Which picture of the past a request asks for (`frame/at.jpg`).
public enum PastPictureTarget: Sendable, Equatable {
    /// The picture whose access unit was received last at or before this time.
    case time(Date)
    /// The picture with this number (`X-Frame-Seq`).
    case number(UInt64)
    /// The picture with this presentation time (`X-Frame-PTS`: a container push's or a pulled
    /// source's, 1/90,000 s).
    case presentationTime(Int64)
}

/// What a session's compressed history holds (`GET /sessions/{id}/history`).
public struct HistorySummary: Sendable, Equatable {
    /// Receive times of the oldest access unit a picture can be decoded from, and of the newest.
    public var from: Date?
    public var to: Date?
    /// GOPs a decode can start from, access units and bytes held.
    public var gops: Int
    public var accessUnits: Int
    public var bytes: Int
    /// The memory those bytes keep alive: the slabs they landed in, whole (`--history-bytes`
    /// bounds this too).
    public var memoryBytes: Int
    /// The picture numbers held: the first, and an upper bound of the last (the newest
    /// pictures may still be inside a decoder).
    public var firstSeq: UInt64?
    public var lastSeq: UInt64?
    /// `--history-seconds` and `--history-bytes`.
    public var limitSeconds: Double
    public var limitBytes: Int
    /// GOPs dropped for the bounds since the session began.
    public var gopsDropped: Int
    /// The newest GOP alone passed `--history-bytes`: none of it is held.
    public var newestGOPTooLarge: Bool
    /// Of `gopsDropped`, those given up to keep every session's history within
    /// `--max-history-memory`, and whether the newest was.
    public var gopsShed: Int
    public var newestGOPShed: Bool

    init(_ summary: CompressedHistory.Summary) {
        from = summary.from
        to = summary.to
        gops = summary.gops
        accessUnits = summary.accessUnits
        bytes = summary.bytes
        memoryBytes = summary.slabBytes
        firstSeq = summary.firstSeq
        lastSeq = summary.lastSeq
        let (seconds, attoseconds) = summary.limits.seconds.components
        limitSeconds = Double(seconds) + Double(attoseconds) / 1e18
        limitBytes = summary.limits.bytes
        gopsDropped = summary.gopsDropped
        newestGOPTooLarge = summary.newestGOPTooLarge
        gopsShed = summary.gopsShed
        newestGOPShed = summary.newestGOPShed
    }

    /// The problem a request outside the history gets: it names the range held.
    var notHeld: SessionError {
        guard let from, let to, let firstSeq, let lastSeq else {
            if newestGOPTooLarge {
                return SessionError(
                    .notInHistory,
                    "the session's history holds no picture: its newest GOP passed --history-bytes (\(limitBytes) bytes) "
                        + "and is not kept; raise --history-bytes, or have the source send keyframes more often")
            }
            if newestGOPShed {
                return SessionError(
                    .notInHistory,
                    "the session's history holds no picture: its newest GOP was given up to keep every session's "
                        + "history within --max-history-memory; raise --max-history-memory, or lower --history-bytes "
                        + "or --history-seconds")
            }
            if gopsDropped > 0 {
                return SessionError(
                    .notInHistory,
                    "the session's history holds no picture it can decode now: its bounds dropped \(gopsDropped) GOPs "
                        + "(a GOP larger than --history-bytes is not kept whole)")
            }
            return SessionError(.notInHistory, "the session holds no picture in its history yet")
        }
        let format = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        let first = from.formatted(format)
        let last = to.formatted(format)
        return SessionError(
            .notInHistory,
            "the session's history holds pictures \(firstSeq) to \(lastSeq), received from \(first) to \(last)",
            facts: ["heldFrom": .text(first), "heldTo": .text(last), "firstSeq": .number(firstSeq), "lastSeq": .number(lastSeq)])
    }

    /// The problem for `target`: for a number inside the range held that no picture has, why
    /// (numbers count access units, so some are never a picture's). Only below `newest`, the
    /// newest picture out: a number above it may be a picture still inside the decoder.
    func notHeld(_ target: PastPictureTarget, newest: UInt64?) -> SessionError {
        let held = notHeld
        if case .presentationTime(let pts) = target {
            return SessionError(
                .notInHistory,
                "no picture held has the PTS \(pts) (the X-Frame-PTS of a container push or a pulled source; "
                    + "Annex B pushes carry none): " + held.message, facts: held.facts)
        }
        guard case .number(let number) = target, let firstSeq, let newest, (firstSeq..<newest).contains(number) else {
            return held
        }
        return SessionError(
            .notInHistory,
            "no picture has the number \(number): numbers count access units, so an access unit that is not "
                + "a picture of its own leaves a gap (the second field of a field pair, a picture the decoder "
                + "could not output, every picture but the keyframes of a `decode: keyframes` session); "
                + held.message, facts: held.facts)
    }
}

extension HistorySummary {
    /// The problem for a picture of the newest GOP of a stream still arriving that the decode
    /// could not settle: later access units may still come before it in output order.
    func notSettledYet(_ target: PastPictureTarget) -> SessionError {
        let held = notHeld
        let which =
            switch target {
            case .number(let number): "picture \(number) is"
            case .time: "the picture of that time is"
            case .presentationTime: "the picture with that PTS is"
            }
        return SessionError(
            .notInHistory,
            "\(which) among the newest of a stream still arriving, whose place in output order later access units "
                + "may still change (as many as the stream reorders): ask again when more has arrived, or after a "
                + "flush; " + held.message, facts: held.facts)
    }
}

extension Session {
    /// A picture from the recent past (`GET /sessions/{id}/frame/at.jpg?t=|seq=`), decoded from
    /// its GOP's keyframe (from the GOP before for an open GOP's leading pictures) by a catch-up
    /// decoder of the shared pool, off every session's queues, and encoded as `request` asks
    /// on the session's encode queue. It has the number and the bytes the live decode gave it.
    ///
    /// `clientHas`: a tag the client holds for the numbered picture answers 304 without a
    /// decode. Failures: `not_in_history` (404, naming the range held), `catchup_queue_full`
    /// (503), a decoder's (`decoder_memory_exceeded`...). `completion` runs once, on any thread.
    public func requestPastPicture(
        _ request: PictureRequest, at target: PastPictureTarget, clientHas: PictureAnswerCondition = PictureAnswerCondition(),
        completion: @escaping @Sendable (Result<PictureAnswer, SessionError>) -> Void
    ) {
        do {
            _ = try request.validated()
        } catch {
            return completion(.failure(error))
        }
        guard !loop.isClosed else { return completion(.failure(.notFound(id))) }
        context.activity.touch()
        let quality = request.effectiveQuality(sessionDefault: pictures.defaultQuality)
        // A tag the client holds, or `*`, matches only a picture that exists (RFC 9110 §13.1.2,
        // and §13.2.1: a request that would be 404 is answered so whatever its conditions): the
        // newest picture, or one the history holds (found below); a number never given out, or
        // no longer held, is not it.
        var heldTag: String?
        if case .number(let number) = target {
            let etag = pictures.etag(sequence: number, request, quality: quality)
            let clientHolds = clientHas.anyEntityTag || clientHas.entityTags.contains(etag)
            if let newest = viewers.newest, newest.sequence == number {
                if clientHolds { return completion(.success(.notModified(etag: etag))) }
                return pictures.serve(newest, request) { completion($0.map { .picture($0) }) }
            }
            if clientHolds { heldTag = etag }
        }
        let lookup: CompressedHistory.Lookup
        switch target {
        case .time(let time):
            // Times are published, and asked for, to the millisecond: a time names its whole
            // millisecond, so the `from` and `to` of the history are in it. A time to come is not
            // in the past (a second of leeway for clocks that differ).
            let through = time.addingTimeInterval(0.000_999)
            lookup = time > clock.now.addingTimeInterval(1) ? .notHeld(history.summary) : history.plan(at: through)
        case .number(let number):
            lookup = history.plan(number: number)
        case .presentationTime(let pts):
            lookup = history.plan(presentationTime: pts)
        }
        let plan: CompressedHistory.DecodePlan
        switch lookup {
        case .notHeld(let summary): return completion(.failure(HistorySummary(summary).notHeld(target, newest: viewers.newest?.sequence)))
        case .plan(let found): plan = found
        }
        // At the open edge of a stream still arriving, the number may have no picture yet: only
        // its decode tells.
        if let heldTag, !plan.atOpenEdge { return completion(.success(.notModified(etag: heldTag))) }
        let heldTagOnceDecoded = heldTag
        // The GOP's parameter sets give its pictures' size: a size it would refuse once
        // decoded is refused before the decode. Not for a time at the open edge, whose picture
        // may come from the GOP before (below), which may have another size.
        let mayBeTheGOPBefore = if case .time = target { plan.atOpenEdge } else { false }
        if !mayBeTheGOPBefore, let format = plan.units.last?.indexed.unit.sequence.format {
            do {
                try pictures.check(request, sourceWidth: format.width, sourceHeight: format.height)
            } catch {
                return completion(.failure(error))
            }
        }
        let facts = loop.reporter.facts
        let options = context.catchUpDecoderOptions(backend: facts.backendChoice)
        let factory = context.services.catchUpPool.warmDecoders.lender(
            making: context.services.decoderFactory, for: plan.units.first?.indexed.unit.sequence.format,
            owner: loop.warmDecoderOwner)
        let metrics = context.metrics
        let admission = context.services.catchUpPool.request { [clock, pictures, history, viewers, loop] permit in
            DispatchQueue.global().async {
                // Deleted while it waited for a decoder: no decode for nobody, and the decoder
                // goes to the next in the queue at once.
                if loop.isClosed {
                    permit.release()
                    return completion(.failure(.notFound(loop.id)))
                }
                let started = clock.uptime
                var (outcome, unitsFed) = PastPictureDecode(plan: plan, options: options, factory: factory).run()
                // Asked for by time, right after a GOP of a stream still arriving began: none of
                // its pictures could be shown yet, so the one on screen was the GOP before's last.
                if case .unsettled = outcome, case .time = target,
                    case .plan(let before) = history.plan(before: plan.targetGOPFirstIndex)
                {
                    let earlier = PastPictureDecode(plan: before, options: options, factory: factory).run()
                    outcome = earlier.outcome
                    unitsFed += earlier.unitsFed
                }
                permit.release()
                let decoded = CatchUpResult.ok(duration: clock.uptime &- started, units: unitsFed)
                switch outcome {
                case .picture(let published):
                    metrics.recordCatchUp(kind: .history, decoded)
                    if let heldTagOnceDecoded { return completion(.success(.notModified(etag: heldTagOnceDecoded))) }
                    pictures.serve(published, request) { completion($0.map { .picture($0) }) }
                case .none:
                    metrics.recordCatchUp(kind: .history, decoded)
                    completion(.failure(HistorySummary(history.summary).notHeld(target, newest: viewers.newest?.sequence)))
                case .unsettled:
                    metrics.recordCatchUp(kind: .history, decoded)
                    completion(.failure(HistorySummary(history.summary).notSettledYet(target)))
                case .failed(let error):
                    let failure = SessionError(error)
                    metrics.recordCatchUp(kind: .history, CatchUpResult(endingIn: failure))
                    completion(.failure(failure))
                }
            }
        }
        if case .refused(let error) = admission {
            metrics.recordCatchUp(kind: .history, .refused)
            completion(.failure(error))
        }
    }
}

/// One decode of a picture from the past: a decoder (warm from the pool, or new) fed a plan's access units until the
/// picture asked for comes out. Holds only that picture (and the decoder's own), and its share
/// of the decoder memory budget while it runs.
struct PastPictureDecode {
    enum Outcome {
        case picture(PublishedFrame)
        /// The decode ended without that picture (a leading picture that cannot be decoded, a
        /// number no picture had).
        case none
        /// Not found among the pictures whose places are settled, while the newest GOP of a
        /// stream still arriving held pictures back whose places later access units may change.
        case unsettled
        case failed(DecodeError)
    }

    let plan: CompressedHistory.DecodePlan
    let options: DecoderOptions
    let factory: any PictureDecoderFactory

    /// The outcome, and how many of the plan's access units went to the decoder before the
    /// picture came out (what `frametap_catchup_access_units_total` counts).
    func run() -> (outcome: Outcome, unitsFed: Int) {
        guard let first = plan.units.first else { return (.none, 0) }
        let decoder: AccessUnitDecoder
        do {
            decoder = try AccessUnitDecoder(options: options, codec: first.indexed.unit.codec, factory: factory)
        } catch {
            return (.failed(error), 0)
        }
        var found: (frame: DecodedFrame, number: UInt64)?
        var finished = false
        var lastError: DecodeError?
        let look: AccessUnitDecoder.PictureHandler = { frame, number in
            guard !finished else { return }
            switch plan.target {
            case .number(let wanted):
                if number == wanted { found = (frame, number) }
                if number >= wanted { finished = true }
            case .pictureOf(let index):
                if frame.accessUnitIndex == index {
                    found = (frame, number)
                    finished = true
                }
            case .accessUnit(let index):
                // The newest picture that could be on screen once that unit had arrived: pictures
                // come out in output order, and the first whose unit came later (a B-frame shown
                // before the P-frame that arrived first) ends the ones that could.
                guard let decoded = frame.accessUnitIndex else { return }
                if decoded <= index {
                    found = (frame, number)
                } else if found != nil {
                    finished = true
                }
            }
        }
        var replay = HistoryReplay(from: first.index)
        replay.feed(
            plan.units, drainAfter: plan.drainAfter, until: { finished },
            decode: { decoder.decode($0, onPicture: look) }, drain: { decoder.drain(onPicture: look) },
            onErrors: { errors in
                if let error = errors.last, found == nil { lastError = error }
            })
        if !finished && plan.atOpenEdge {
            // More of this GOP may come: a drain gives out pictures that later access units may
            // yet come before in output order, so their numbers are not known. Such units can
            // come before at most as many decoded pictures as the stream reorders: all but the
            // last that many pictures the drain gives out keep their places. A picture asked for
            // by time whose own is among the rest is the newest settled one received by then.
            let reordered = plan.units.last?.indexed.unit.sequence.reorderedPictures ?? 16
            var unsettled: [(frame: DecodedFrame, number: UInt64)] = []
            _ = decoder.drain { frame, number in
                unsettled.append((frame, number))
                if unsettled.count > reordered {
                    let settled = unsettled.removeFirst()
                    look(settled.frame, settled.number)
                }
            }
            if found == nil, !unsettled.isEmpty { return (.unsettled, replay.unitsFed) }
        } else if !finished {
            _ = decoder.drain(onPicture: look)
        }
        guard let found, let index = found.frame.accessUnitIndex,
            let unit = plan.units.first(where: { $0.index == index })
        else {
            if let lastError, lastError.code == .decoderMemoryExceeded || lastError.code == .decoderUnavailable {
                return (.failed(lastError), replay.unitsFed)
            }
            return (.none, replay.unitsFed)
        }
        return (
            .picture(
                PublishedFrame(
                    pastFrame: found.frame, sequence: found.number, receivedAt: unit.receivedAt,
                    receivedUptime: unit.receivedUptime)), replay.unitsFed
        )
    }
}
