import Dispatch
import Synchronization
import Timekeeping

#if canImport(Glibc)
    import Glibc
#endif

/// Gives memory freed by ended sessions back to the operating system.
///
/// A session's decoder and encoder buffers (megabytes per picture) are allocated and freed on
/// whichever worker threads ran it, so they land in several glibc malloc arenas, which keep
/// freed pages mapped. Without a trim, RSS after many session create/delete cycles plateaus
/// far above what the live sessions use (measured: 40 → 140 MB after 4,000 cycles of a
/// 320x240 push, flat afterwards — fragmentation, not a leak). `malloc_trim` returns those
/// pages. It is looked up at run time because it is glibc-only and not in Swift's Glibc module.
/// One per registry, on its clock.
final class MemoryReturn: Sendable {
    private typealias TrimFunction = @convention(c) (Int) -> Int32

    private static let trim: TrimFunction? = {
        guard let symbol = dlsym(nil, "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: TrimFunction.self)
    }()
    private static let queue = DispatchQueue(label: "frametap.memory-return", qos: .utility)

    private let clock: any ServiceClock
    private let scheduled = Atomic<Bool>(false)

    init(clock: any ServiceClock) {
        self.clock = clock
    }

    /// Trims about a second from now, once for any number of calls in between (the ended
    /// sessions' last buffers are freed asynchronously on their own queues).
    func soon() {
        guard Self.trim != nil,
            scheduled.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        // The clock's timer only hands the trim over: it takes milliseconds on a large heap.
        clock.schedule(at: clock.deadline(after: .seconds(1))) { [weak self] in
            guard let self else { return }
            Self.queue.async {
                self.scheduled.store(false, ordering: .releasing)
                _ = Self.trim?(0)
            }
        }
    }
}
