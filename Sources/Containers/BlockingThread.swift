import CFFmpeg

#if canImport(Glibc)
    import Glibc
#endif

/// A thread of its own for work that blocks: libavformat reads synchronously, so each demuxer
/// waits for its bytes on a thread no other work shares (a blocked Dispatch worker would take
/// one from a pool every other queue needs).
public enum BlockingThread {
    private final class Work {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    /// Runs `body` on a new detached thread named `name` (at most 15 bytes show in `top -H`;
    /// unnamed, it would carry the name of the thread that started it, an HTTP worker's).
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let work = Unmanaged.passRetained(Work(name: name, body: body)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        // libavformat's demuxers keep their state on the heap; 1 MiB of stack is plenty.
        pthread_attr_setstacksize(&attributes, 1 << 20)
        var thread = pthread_t()
        let status = pthread_create(
            &thread, &attributes,
            { raw in
                let work = Unmanaged<Work>.fromOpaque(raw!).takeRetainedValue()
                ft_name_this_thread(String(work.name.utf8.prefix(15))!)
                work.body()
                return nil
            }, work)
        precondition(status == 0, "cannot start a thread: \(String(cString: strerror(status)))")
    }
}
