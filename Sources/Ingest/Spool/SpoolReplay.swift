import Synchronization
import Timekeeping
import VideoCoding

/// A spooled push as an input. libmicrohttpd cannot answer before the upload ends, and
/// decoding while uploading would have to hold every picture until then. So while the body
/// arrives, its upload queue's bytes go to an unlinked temporary file (bounded memory for any
/// length), and once it has, the file is read back in small pieces, each only while the
/// multipart answer wants another picture (`wantsBytes`): the client's reading paces decoding.
public final class SpoolReplay<Failure: IngestFailure>: IngestSource {
    /// Small reads bound how many pictures one decoder step can produce (and hold) at once.
    static var readSize: Int { 4096 }

    private let upload: UploadQueue<Failure>
    private let file: SpoolFile
    private let clock: any ServiceClock
    /// Whether the answer wants another picture now; it wakes the decode loop when that may
    /// have become true.
    private let wantsBytes: @Sendable () -> Bool
    /// Told once, on the decode queue, when the whole body is in the file.
    private let spooled: @Sendable () -> Void
    private let state = Mutex(ReplayState())

    private struct ReplayState {
        var spooled = false
        var offset = 0
        var ended = false
        /// Where the file's bytes are read to: the pool's slabs, as an upload's land.
        var landing = SlabWriter()
        /// When the spooled bytes arrived: each piece read back carries its bytes' time.
        var arrivals = ArrivalTimeline()
    }

    public init(
        upload: UploadQueue<Failure>, file: SpoolFile, clock: any ServiceClock, wantsBytes: @escaping @Sendable () -> Bool,
        spooled: @escaping @Sendable () -> Void
    ) {
        self.upload = upload
        self.file = file
        self.clock = clock
        self.wantsBytes = wantsBytes
        self.spooled = spooled
    }

    public var totalBytes: Int { upload.totalBytes }

    public func next() -> IngestEvent<Failure>? { take().map(IngestEvent.init) }

    private func take() -> UploadQueue<Failure>.Event? {
        if !state.withLock({ $0.spooled }) {
            guard let event = spoolArrivedBytes() else { return nil }
            guard case .end = event else { return event }
        }
        guard !state.withLock({ $0.ended }), wantsBytes() else { return nil }
        do {
            return try state.withLock { (state) throws(IngestError) -> UploadQueue<Failure>.Event in
                let offset = state.offset
                let chunk = try state.landing.fill(upTo: Self.readSize) { (room) throws(IngestError) in
                    try file.read(at: offset, into: room)
                }
                if chunk.isEmpty {
                    state.ended = true
                    state.landing.release()
                    return .end
                }
                state.offset += chunk.count
                let arrived = state.arrivals.arrival(ofBytesBefore: state.offset) ?? clock.uptime
                return .bytes(chunk, receivedAt: arrived)
            }
        } catch {
            state.withLock { $0.ended = true }
            return .stopped(.refused(Failure(error)))
        }
    }

    /// Writes what the upload queue holds to the file. Returns `.end` once the whole body is
    /// spooled, the upload's `.stopped` event when it ended without its body, nil otherwise.
    private func spoolArrivedBytes() -> UploadQueue<Failure>.Event? {
        while let event = upload.take() {
            switch event {
            case .bytes(let bytes, let receivedAt):
                let written = bytes.withUnsafeBytes { buffer in
                    Result { () throws(IngestError) in try file.write(buffer) }
                }
                if case .success = written {
                    state.withLock { $0.arrivals.recordArrival(count: bytes.count, at: receivedAt) }
                }
                if case .failure(let error) = written {
                    // The client is told at once; the queue's stop event ends the push.
                    upload.refuse(Failure(error))
                }
            case .end:
                state.withLock { $0.spooled = true }
                spooled()
                return .end
            case .stopped:
                return event
            }
        }
        return nil
    }

    public func setConsumerWake(_ wake: @escaping @Sendable () -> Void) {
        upload.setConsumerWake(wake)
    }

    public func close() {
        file.close()
    }
}
