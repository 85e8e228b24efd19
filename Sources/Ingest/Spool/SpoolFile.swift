import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

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
    func take(_ count: Int) throws(IngestError) {
        let held = used.withLock { used -> Int? in
            guard used + count <= limit else { return used }
            used += count
            return nil
        }
        if let held {
            throw IngestError(
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
public final class SpoolFile: Sendable {
    private let descriptor = Atomic<Int32>(-1)
    private let writeOffset = Atomic<Int>(0)
    private let budget: SpoolBudget
    /// What this file took from the budget (its size), given back once, at `close()`.
    private let taken = Atomic<Int>(0)

    public init(directory: String, budget: SpoolBudget) throws(IngestError) {
        self.budget = budget
        var template = Array((directory + "/frametap-spool-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw IngestError(.spoolFailed, "cannot create a spool file in \(directory): \(String(cString: strerror(errno)))")
        }
        // Unlinked at once: the file vanishes with its descriptor however the request ends.
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        descriptor.store(fd, ordering: .releasing)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(IngestError) {
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
                throw IngestError(.spoolFailed, "writing the spool file failed: \(String(cString: strerror(errno)))")
            }
            done += written
        }
        writeOffset.store(start + done, ordering: .relaxed)
    }

    /// Reads up to `buffer.count` bytes at `offset` into `buffer`; how many (0 at the end, or
    /// once the file is closed).
    func read(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(IngestError) -> Int {
        let fd = descriptor.load(ordering: .acquiring)
        guard fd >= 0, let base = buffer.baseAddress else { return 0 }
        while true {
            let got = pread(fd, base, buffer.count, off_t(offset))
            if got >= 0 { return got }
            if errno != EINTR {
                throw IngestError(.spoolFailed, "reading the spool file failed: \(String(cString: strerror(errno)))")
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
