import Containers
import VideoCoding

/// One input as a session's decode loop reads it, in order, on its decode queue: a live push's
/// `UploadQueue`, a spooled push's `SpoolReplay`, a push whose first bytes decide whether it goes
/// through a container's demuxer (`PushSniffer`), or a pulled source (`PullSource`). It is the seam
/// every kind of input plugs into: whatever the source, the loop does the same with what it reads
/// (decode, publish, and at the end one end-of-stream path).
public protocol IngestSource<Failure>: AnyObject, Sendable {
    /// The error the input's consumer answers with, which the input ends with when it is refused.
    associatedtype Failure: IngestFailure

    /// The next event without waiting, or nil when none is ready (the wake-up then runs once
    /// one is). After the terminal event (`.end` or `.stopped`), always nil.
    func next() -> IngestEvent<Failure>?
    /// Runs `wake` (on any thread) when an event is ready after `next()` returned nil.
    func setConsumerWake(_ wake: @escaping @Sendable () -> Void)
    /// The bytes of the push received so far.
    var totalBytes: Int { get }
    /// The input is over for its consumer: whatever the source holds goes (on the decode queue).
    func close()
    /// The consumer has assembled `total` access units of its stream so far, also those it then
    /// dropped (before a keyframe, or not keyframes in keyframes mode): the stream is video
    /// (any thread).
    func accessUnitsAssembled(total: Int)
}

extension IngestSource {
    /// Only a pulled source of Annex B bytes keeps count (`PullSource`).
    public func accessUnitsAssembled(total: Int) {}
}

/// What an input hands its consumer, in order: bytes, samples, stream breaks, and how it ended.
public enum IngestEvent<Failure: IngestFailure>: Sendable {
    /// Annex B bytes, with the monotonic time they arrived.
    case bytes(SlabBytes, receivedAt: UInt64)
    /// A sample of a container's or a source's video track, with the time its last byte arrived.
    case sample(DemuxedSample, receivedAt: UInt64)
    /// A pulled source lost its connection: the stream ends here (the decoder's delayed pictures
    /// come out), and the next connection starts a new one.
    case streamBreak
    /// The whole push arrived and was read.
    case end
    /// Nothing more follows.
    case stopped(IngestStop<Failure>)
}

/// Why an input ended before its end.
public enum IngestStop<Failure: IngestFailure>: Sendable, Equatable {
    /// The connection ended before the body did. Bytes that arrived before are still delivered.
    case clientGone
    /// The server stopped listening (shutdown). Queued bytes are dropped: nothing more is decoded.
    case serverShutdown
    /// The input was refused: past its limit (the bytes before the limit are delivered), by this
    /// layer (a spool or a container that failed), or by its consumer (queued bytes are dropped).
    case refused(Failure)
    /// The server answered before the body ended, for the consumer (which, having decided
    /// that answer, stopped listening already). Queued bytes are dropped.
    case answered
}

/// The error type an input's consumer answers with (a session's `SessionError`). A refusal
/// travels both ways through an input, from the consumer to the producer (whose client is
/// answered with it) and from this layer to the consumer, so both read one type: this layer's
/// own errors and a container's are made into it.
public protocol IngestFailure: Error, Sendable, Equatable {
    init(_ error: IngestError)
    init(_ error: ContainerError)
}
