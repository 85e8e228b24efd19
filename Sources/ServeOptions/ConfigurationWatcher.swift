import Containers
import FoundationEssentials
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Calls `changed` when the configuration file's contents changed on disk. It watches the
/// file's directory (inotify), not the file: editors write a new file and rename it over the
/// old one, and a Kubernetes ConfigMap volume swaps its `..data` link to a new directory at
/// once, neither of which a watch on the old file would see. When the path is a link, the
/// directory of the file it leads to is watched too (found again after each change, as a swap
/// moves it). After an event it waits until the
/// directory has been quiet for `quiet` (a save or a swap is several events), then reads the
/// file, following links, and calls `changed` only when its bytes differ from the last seen.
/// It runs on a thread of its own, blocked in `poll` on the inotify descriptor and a stop event.
public final class ConfigurationWatcher: Sendable {
    public let path: String
    /// The write end of the pipe whose read end the thread polls: a byte stops it.
    private let stopWriter: Int32
    private let stopped = Atomic<Bool>(false)

    /// Starts watching; nil (logged) when the directory cannot be watched.
    public init?(
        path: String, quiet: Duration = .milliseconds(300), logger: Logger, changed: @escaping @Sendable () -> Void
    ) {
        self.path = path
        let directory = Self.directory(of: path)
        let events = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB)
        let watch = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        var stopPipe: [Int32] = [-1, -1]
        guard watch >= 0, pipe(&stopPipe) == 0, inotify_add_watch(watch, directory, events) >= 0 else {
            logger.warning(
                "configuration file not watched (SIGHUP still reloads it)",
                metadata: ["directory": "\(directory)", "reason": "\(String(cString: strerror(errno)))"])
            for descriptor in [watch] + stopPipe where descriptor >= 0 { close(descriptor) }
            return nil
        }
        for descriptor in stopPipe { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        stopWriter = stopPipe[1]
        let stopReader = stopPipe[0]
        logger.notice("watching the configuration file", metadata: ["file": "\(path)", "directory": "\(directory)"])
        let quietMilliseconds = Int32(quiet.components.seconds * 1000 + quiet.components.attoseconds / 1_000_000_000_000_000)
        Self.watchResolvedDirectory(of: path, inotify: watch, events: events)
        // Read now, with the watches in place: a change from here on is seen, whenever the thread starts.
        let initial = Self.contents(of: path)
        BlockingThread.start(name: "config-watch") {
            Self.watch(
                path: path, initial: initial, inotify: watch, events: events, stop: stopReader,
                quietMilliseconds: quietMilliseconds, changed: changed)
        }
    }

    /// Stops watching (idempotent); the thread closes its descriptors.
    public func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var byte: UInt8 = 1
        _ = write(stopWriter, &byte, 1)
        close(stopWriter)
    }

    /// The loop: wait for an event (or the end of a quiet period, once one began), then compare.
    private static func watch(
        path: String, initial: [UInt8]?, inotify: Int32, events: UInt32, stop: Int32, quietMilliseconds: Int32,
        changed: @Sendable () -> Void
    ) {
        defer {
            close(inotify)
            close(stop)
        }
        var lastContents = initial
        var settling = false
        var descriptors = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: stop, events: Int16(POLLIN), revents: 0)]
        while true {
            let ready = poll(&descriptors, 2, settling ? quietMilliseconds : -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            if descriptors[1].revents != 0 { return }
            if descriptors[0].revents != 0 {
                drain(inotify)
                settling = true
                continue
            }
            // Quiet for the whole period.
            settling = false
            watchResolvedDirectory(of: path, inotify: inotify, events: events)
            let now = contents(of: path)
            guard now != lastContents else { continue }
            lastContents = now
            changed()
        }
    }

    /// Watches the directory of the file `path` leads to, when it is a link (a directory already
    /// watched keeps its one watch).
    private static func watchResolvedDirectory(of path: String, inotify: Int32, events: UInt32) {
        guard let resolved = realpath(path, nil) else { return }
        defer { free(resolved) }
        let target = String(cString: resolved)
        guard target != path else { return }
        _ = inotify_add_watch(inotify, directory(of: target), events)
    }

    private static func drain(_ descriptor: Int32) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while buffer.withUnsafeMutableBytes({ read(descriptor, $0.baseAddress, $0.count) }) > 0 {}
    }

    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The file's bytes (nil when it cannot be read: mid-swap, or removed).
    private static func contents(of path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { Array($0) }
    }
}
