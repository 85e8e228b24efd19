import Containers
import Dispatch
import FoundationEssentials
import Synchronization
import Timekeeping

#if canImport(Glibc)
    import Glibc
#endif

/// What a session's decode loop reads from a push or a pull, in order.
enum IngestEvent: Sendable {
    /// Annex B bytes, with the monotonic time they arrived.
    case bytes([UInt8], receivedAt: UInt64)
    /// A sample of a container's or a source's video track, with the time its last byte arrived.
    case sample(DemuxedSample, receivedAt: UInt64)
    /// A pulled source lost its connection: the stream ends here (the decoder's delayed pictures
    /// come out), and the next connection starts a new one.
    case streamBreak
    /// The whole push arrived and was read.
    case end
    /// Nothing more follows.
    case stopped(UploadQueue.Stop)

    init(_ event: UploadQueue.Event) {
        switch event {
        case .bytes(let bytes, let receivedAt): self = .bytes(bytes, receivedAt: receivedAt)
        case .end: self = .end
        case .stopped(let stop): self = .stopped(stop)
        }
    }
}

/// One push's (or a pull's) input as a session's decode loop reads it, in order, on its decode
/// queue: a live push's `UploadQueue`, a spooled push's `SpoolReplay`, a push routed through a
/// container's demuxer (`PushRouter`), or a pulled source (`PullSource`). Whatever the source,
/// the loop does the same with what it reads (decode, publish, and at the end one end-of-stream
/// path).
protocol ByteSource: AnyObject, Sendable {
    /// The next event without waiting, or nil when none is ready (the wake-up then runs once
    /// one is). After the terminal event (`.end` or `.stopped`), always nil.
    func next() -> IngestEvent?
    /// Runs `wake` (on any thread) when an event is ready after `take()` returned nil.
    func setConsumerWake(_ wake: @escaping @Sendable () -> Void)
    /// The bytes of the push received so far.
    var totalBytes: Int { get }
    /// The push is over for the session: whatever the source holds goes (on the decode queue).
    func close()
}

/// A live push: its bytes are decoded as they arrive.
extension UploadQueue: ByteSource {
    func next() -> IngestEvent? { take().map(IngestEvent.init) }
    func close() {}
}

/// A spooled push as a byte source. libmicrohttpd cannot answer before the upload ends, and
/// decoding while uploading would have to hold every picture until then. So while the body
/// arrives, its upload queue's bytes go to an unlinked temporary file (bounded memory for any
/// length), and once it has, the file is read back in small pieces, each only while the
/// multipart answer wants another picture (`wantsBytes`): the client's reading paces decoding.
final class SpoolReplay: ByteSource {
    /// Small reads bound how many pictures one decoder step can produce (and hold) at once.
    static let readSize = 4096

    private let upload: UploadQueue
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
    }

    init(
        upload: UploadQueue, file: SpoolFile, clock: any ServiceClock, wantsBytes: @escaping @Sendable () -> Bool,
        spooled: @escaping @Sendable () -> Void
    ) {
        self.upload = upload
        self.file = file
        self.clock = clock
        self.wantsBytes = wantsBytes
        self.spooled = spooled
    }

    var totalBytes: Int { upload.totalBytes }

    func next() -> IngestEvent? { take().map(IngestEvent.init) }

    private func take() -> UploadQueue.Event? {
        if !state.withLock({ $0.spooled }) {
            guard let event = spoolArrivedBytes() else { return nil }
            guard case .end = event else { return event }
        }
        guard !state.withLock({ $0.ended }), wantsBytes() else { return nil }
        let offset = state.withLock { $0.offset }
        do {
            let chunk = try file.read(at: offset, count: Self.readSize)
            return state.withLock { state in
                if chunk.isEmpty {
                    state.ended = true
                    return .end
                }
                state.offset += chunk.count
                return .bytes(chunk, receivedAt: clock.uptime)
            }
        } catch {
            state.withLock { $0.ended = true }
            return .stopped(.refused(error))
        }
    }

    /// Writes what the upload queue holds to the file. Returns `.end` once the whole body is
    /// spooled, the upload's `.stopped` event when it ended without its body, nil otherwise.
    private func spoolArrivedBytes() -> UploadQueue.Event? {
        while let event = upload.take() {
            switch event {
            case .bytes(let bytes, _):
                let written = bytes.withUnsafeBytes { buffer in
                    Result { () throws(SessionError) in try file.write(buffer) }
                }
                if case .failure(let error) = written {
                    // The client is told at once; the queue's stop event ends the push.
                    upload.refuse(error)
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

    func setConsumerWake(_ wake: @escaping @Sendable () -> Void) {
        upload.setConsumerWake(wake)
    }

    func close() {
        file.close()
    }
}

/// The disk every spooled upload may fill together (`--max-spool-total-bytes`; the per-upload
/// bound is `maxSpoolBytes`): each spool file takes its bytes from it as it grows and gives them
/// back when it is closed. One for the whole server, shared by every session.
public final class SpoolBudget: Sendable {
    /// Bytes all spool files may hold together.
    public let limit: Int
    private let used = Mutex(0)

    public init(limit: Int) {
        self.limit = limit
    }

    /// Bytes the spool files hold now.
    public var usedBytes: Int { used.withLock { $0 } }

    /// Takes `count` bytes, or throws `spoolFull` (nothing taken) when they would pass the limit.
    func take(_ count: Int) throws(SessionError) {
        let held = used.withLock { used -> Int? in
            guard used + count <= limit else { return used }
            used += count
            return nil
        }
        if let held {
            throw SessionError(
                .spoolFull,
                "the spool is full: uploads answered as multipart/mixed hold \(held) of the \(limit) bytes "
                    + "they may spool together (--max-spool-total-bytes); try again when they are done")
        }
    }

    func give(_ count: Int) {
        used.withLock { $0 -= count }
    }
}

/// An unlinked temporary file: written and read on the session's decode queue, closed there or
/// when freed. Its bytes count against the server's `SpoolBudget` until it is closed.
final class SpoolFile: Sendable {
    private let descriptor = Atomic<Int32>(-1)
    private let writeOffset = Atomic<Int>(0)
    private let budget: SpoolBudget
    /// What this file took from the budget (its size), given back once, at `close()`.
    private let taken = Atomic<Int>(0)

    init(directory: String, budget: SpoolBudget) throws(SessionError) {
        self.budget = budget
        var template = Array((directory + "/frametap-spool-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw SessionError(.spoolFailed, "cannot create a spool file in \(directory): \(String(cString: strerror(errno)))")
        }
        // Unlinked at once: the file vanishes with its descriptor however the request ends.
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        descriptor.store(fd, ordering: .releasing)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(SessionError) {
        let fd = descriptor.load(ordering: .acquiring)
        guard fd >= 0 else { return }
        try budget.take(bytes.count)
        taken.add(bytes.count, ordering: .relaxed)
        let start = writeOffset.load(ordering: .relaxed)
        var done = 0
        while done < bytes.count {
            let written = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(start + done))
            if written < 0 {
                if errno == EINTR { continue }
                throw SessionError(.spoolFailed, "writing the spool file failed: \(String(cString: strerror(errno)))")
            }
            done += written
        }
        writeOffset.store(start + done, ordering: .relaxed)
    }

    func read(at offset: Int, count: Int) throws(SessionError) -> [UInt8] {
        let fd = descriptor.load(ordering: .acquiring)
        guard fd >= 0 else { return [] }
        var buffer = [UInt8](repeating: 0, count: count)
        while true {
            let got = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, count, off_t(offset)) }
            if got >= 0 {
                buffer.removeSubrange(got...)
                return buffer
            }
            if errno != EINTR {
                throw SessionError(.spoolFailed, "reading the spool file failed: \(String(cString: strerror(errno)))")
            }
        }
    }

    func close() {
        let fd = descriptor.exchange(-1, ordering: .acquiringAndReleasing)
        if fd >= 0 { _ = Glibc.close(fd) }
        budget.give(taken.exchange(0, ordering: .acquiringAndReleasing))
    }

    deinit { close() }
}
