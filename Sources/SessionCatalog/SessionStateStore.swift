import FoundationEssentials
import Sessions
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `--state-dir`: the definitions of the sessions made by `PUT`, kept in one file that is
/// replaced whole at each change (written to a temporary file, which is synced, renamed over
/// the old one, and the directory synced), so that at any moment the file on disk is the old
/// one or the new one, never a mix, and a change is on disk before its request is answered.
///
/// Not SQLite: the server links Foundation's essentials only, a few dozen definitions rewritten
/// whole cost less than a database, and the file stays readable. One process at a time holds
/// the directory (an exclusive `flock` on it): a second server on the same directory would
/// overwrite the first's sessions, so it refuses to start.
public final class SessionStateStore: Sendable {
    public static let fileName = "sessions.state"

    public let directory: String
    public let path: String
    /// Held open for the process's life: its lock keeps other servers out, and it is what is
    /// synced after each rename.
    private let directoryDescriptor: Int32
    /// One write at a time, each of the whole set.
    private let writing = Mutex(())

    /// Why the store cannot be opened or written.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Opens (making it when missing, mode 0700) and locks `directory`, and reads the saved
    /// definitions. A file that is torn, damaged or of another format is never read as fewer
    /// sessions: it is copied aside (its name is in the error) and opening fails. A temporary
    /// file left by a write that never finished (its request was never answered) is removed.
    public static func open(directory: String) throws(Failure) -> (SessionStateStore, [SessionID: SessionOptions]) {
        if mkdir(directory, 0o700) != 0, errno != EEXIST {
            throw Failure(description: "cannot make the state directory \(directory): \(Self.errorText())")
        }
        let descriptor = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw Failure(description: "cannot open the state directory \(directory): \(Self.errorText())")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno == EWOULDBLOCK ? "another frametap serve uses it" : Self.errorText()
            close(descriptor)
            throw Failure(description: "cannot lock the state directory \(directory): \(reason)")
        }
        let store = SessionStateStore(directory: directory, descriptor: descriptor)
        unlink(store.temporaryPath)
        // Every save writes this file first: a directory it cannot be made in (read-only, owned
        // by someone else) would accept the start and then fail every PUT.
        let probe = Glibc.open(store.temporaryPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard probe >= 0 else {
            let reason = Self.errorText()
            throw Failure(description: "cannot write in the state directory \(directory): \(reason); the sessions PUT makes could not be kept")
        }
        close(probe)
        unlink(store.temporaryPath)
        return (store, try store.read())
    }

    private init(directory: String, descriptor: Int32) {
        self.directory = directory
        path = directory.hasSuffix("/") ? directory + Self.fileName : directory + "/" + Self.fileName
        directoryDescriptor = descriptor
    }

    deinit {
        close(directoryDescriptor)
    }

    private var temporaryPath: String { path + ".tmp" }

    private func read() throws(Failure) -> [SessionID: SessionOptions] {
        let bytes: [UInt8]
        switch Self.contents(of: path) {
        case .missing: return [:]
        case .failed(let reason): throw Failure(description: "cannot read the state file \(path): \(reason)")
        case .read(let read): bytes = read
        }
        do {
            return try StoredSessions.decode(bytes)
        } catch {
            let copy = keepCopy(bytes)
            throw Failure(
                description:
                    "the state file \(path) cannot be used: \(error.reason). \(copy). Nothing was started: to start without "
                    + "the sessions it held, move \(path) away (or restore it from a backup)")
        }
    }

    /// The definitions a state file's bytes hold (what `open` reads), or why they cannot be read.
    public static func definitions(in bytes: [UInt8]) throws(Failure) -> [SessionID: SessionOptions] {
        do {
            return try StoredSessions.decode(bytes)
        } catch {
            throw Failure(description: error.reason)
        }
    }

    /// A copy of a file that cannot be read, next to it, named by the time (Unix seconds).
    private func keepCopy(_ bytes: [UInt8]) -> String {
        let copy = "\(path).unreadable-\(Int(Date().timeIntervalSince1970))"
        do {
            try Self.write(bytes, to: copy)
            return "A copy is kept as \(copy)"
        } catch {
            return "No copy could be kept (\(error.description))"
        }
    }

    /// Replaces the saved definitions with `definitions`; returns once they are on disk.
    public func save(_ definitions: [SessionID: SessionOptions]) throws(Failure) {
        let bytes = StoredSessions.encode(definitions)
        try writing.withLock { _ throws(Failure) in
            try Self.write(bytes, to: temporaryPath)
            guard rename(temporaryPath, path) == 0 else {
                throw Failure(description: "cannot rename \(temporaryPath) to \(path): \(Self.errorText())")
            }
            guard fsync(directoryDescriptor) == 0 else {
                throw Failure(description: "cannot sync the state directory \(directory): \(Self.errorText())")
            }
        }
    }

    /// Writes `bytes` to a new file at `path` (mode 0600: source URLs carry credentials) and
    /// syncs it.
    private static func write(_ bytes: [UInt8], to path: String) throws(Failure) {
        let descriptor = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Failure(description: "cannot create \(path): \(errorText())") }
        defer { close(descriptor) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { buffer in
                Glibc.write(descriptor, buffer.baseAddress! + written, buffer.count - written)
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "cannot write \(path): \(errorText())")
            }
            written += count
        }
        guard fsync(descriptor) == 0 else { throw Failure(description: "cannot sync \(path): \(errorText())") }
    }

    private enum Contents {
        case missing
        case failed(String)
        case read([UInt8])
    }

    private static func contents(of path: String) -> Contents {
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return errno == ENOENT ? .missing : .failed(errorText()) }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return .failed(errorText())
            }
            if count == 0 { return .read(bytes) }
            bytes += chunk[..<count]
        }
    }

    private static func errorText() -> String { String(cString: strerror(errno)) }
}
