import FoundationEssentials
import Synchronization
import Timekeeping
import VideoCoding

#if canImport(Glibc)
    import Glibc
#endif

/// One device context per device per process, shared by every decoder on it.
///
/// A CUDA context costs about 0.25 s and a large slice of GPU memory (measured on an H100),
/// so the pool opens each device once, on the first decoder that asks for it, and **keeps it
/// open for the life of the pool** (for `shared`: the process), even when no session uses it:
/// sessions come and go all the time, and re-creating the context each time the last one
/// ends would make every new session pay the 0.25 s again. Each decoder still gets its own
/// codec context (its own NVDEC decoder or VA context) over the shared device context.
///
/// A decoder holds a `HardwareDeviceLease` for as long as it decodes on the device; the pool
/// counts leases per device (`usage()`: "the sessions each device holds") and gives a new
/// decoder the least-loaded usable device of the kind it asks for (ties: list order).
///
/// A device that fails to open is remembered with the reason and skipped until its back-off
/// ends (`retryDelay`, doubling with each further failure up to `maxRetryDelay`), so a missing
/// or broken GPU costs one failed open per back-off period, not one per session.
///
/// Opening happens under the pool's lock: decoders asking for a device while another one
/// is being opened wait for it (at most one open per device at a time, never two contexts
/// for one device).
public final class HardwareDevicePool: Sendable {
    /// The process's pool on the real machine, for callers that decode outside a server (the
    /// CLI, `DecoderOptions`' default); `frametap serve` builds its own on the service's clock.
    public static let shared = HardwareDevicePool(clock: SystemClock())

    public let platform: any HardwarePlatform
    /// Where `auto` sessions decode: the devices' and the CPU's capacity and load.
    public let engines: EnginePlacer
    public let retryDelay: Duration
    public let maxRetryDelay: Duration
    /// CUDA contexts opened on each CUDA device (`--cuda-contexts`); new decoders take them in
    /// turn. One is the default: every context costs about 0.25 s and its own GPU memory.
    public let cudaContextsPerDevice: Int
    /// Times the back-off; tests move it by hand.
    private let clock: any ServiceClock
    private let state = Mutex(State())

    public init(
        platform: any HardwarePlatform = LibavHardwarePlatform(), retryDelay: Duration = .seconds(30),
        maxRetryDelay: Duration = .seconds(600), cudaContextsPerDevice: Int = 1, clock: any ServiceClock,
        engines: EnginePlacer? = nil
    ) {
        self.platform = platform
        self.cudaContextsPerDevice = max(1, cudaContextsPerDevice)
        self.engines = engines ?? EnginePlacer(clock: clock)
        self.retryDelay = retryDelay
        self.maxRetryDelay = maxRetryDelay
        self.clock = clock
    }

    private struct State {
        var devices: [HardwareDeviceID: Entry] = [:]
        /// First-seen order, so `usage()` lists devices stably.
        var order: [HardwareDeviceID] = []

        mutating func entry(_ device: HardwareDeviceID) -> Entry {
            if let entry = devices[device] { return entry }
            devices[device] = Entry()
            order.append(device)
            return Entry()
        }
    }

    private struct Entry {
        var status = Status.notOpened
        var sessions = 0
        var failures = 0
        /// The device's further CUDA contexts (`cudaContextsPerDevice` - 1 of them, those
        /// that opened), and how many leases were given out: lease k gets context k modulo all.
        var moreContexts: [OpenedHardwareDevice] = []
        var leasesGiven = 0
    }

    private enum Status {
        case notOpened
        case open(OpenedHardwareDevice)
        case failed(DecodeError, retryAt: UInt64)
    }

    /// The devices of `kind` a decoder may use: those in `list`, or by default every CUDA
    /// device the driver reports, every render node. The failure says why there are none,
    /// without the kind's name (the caller prefixes it).
    public func devices(_ kind: HardwareDeviceKind, in list: HardwareDeviceList?) -> Result<[HardwareDeviceID], DecodeError> {
        let found: [HardwareDeviceID]
        if let list {
            found = list.devices(of: kind, renderNodes: platform.renderNodes)
            if found.isEmpty {
                let why =
                    kind == .vaapi && list.entries.contains(.everyRenderNode)
                    ? "no /dev/dri/renderD* render node found" : "no \(kind.displayName) device in the device list \(list)"
                return .failure(DecodeError(.decoderUnavailable, why))
            }
        } else {
            switch kind {
            case .cuda:
                switch platform.cudaDevices() {
                case .failure(let error):
                    return .failure(DecodeError(.decoderUnavailable, "no device (\(error.message))"))
                case .success(let ordinals):
                    found = ordinals.map(HardwareDeviceID.cuda)
                }
            case .vaapi:
                found = platform.renderNodes().map(HardwareDeviceID.renderNode)
            }
            if found.isEmpty {
                let why = kind == .vaapi ? "no /dev/dri/renderD* render node found" : "no device"
                return .failure(DecodeError(.decoderUnavailable, why))
            }
        }
        state.withLock { state in
            for device in found { _ = state.entry(device) }
        }
        return .success(found)
    }

    /// A lease on the least-loaded device among `candidates` that is open or opens now.
    /// Devices still in their back-off are skipped; the failure lists every device and why.
    public func lease(among candidates: [HardwareDeviceID]) -> Result<HardwareDeviceLease, DecodeError> {
        state.withLock { state -> Result<HardwareDeviceLease, DecodeError> in
            var seen = Set<HardwareDeviceID>()
            var remaining = candidates.filter { seen.insert($0).inserted }
            var notes: [String] = []
            let now = clock.uptime
            remaining.removeAll { device in
                guard case .failed(let error, let retryAt) = state.entry(device).status, now < retryAt else { return false }
                let seconds = Int((retryAt - now + 999_999_999) / 1_000_000_000)
                notes.append("\(error.message) (next try in \(seconds) s)")
                return true
            }
            while let pick = remaining.enumerated().min(by: { a, b in
                let (loadA, loadB) = (state.devices[a.element]?.sessions ?? 0, state.devices[b.element]?.sessions ?? 0)
                return loadA != loadB ? loadA < loadB : a.offset < b.offset
            }) {
                let device = pick.element
                remaining.remove(at: pick.offset)
                var entry = state.entry(device)
                let opened: OpenedHardwareDevice
                if case .open(let existing) = entry.status {
                    opened = existing
                } else {
                    switch platform.open(device) {
                    case .success(let fresh):
                        opened = fresh
                        entry.status = .open(fresh)
                        entry.failures = 0
                        if device.kind == .cuda && cudaContextsPerDevice > 1 {
                            entry.moreContexts = (1..<cudaContextsPerDevice).compactMap { _ in
                                try? platform.open(device).get()
                            }
                        }
                    case .failure(let error):
                        entry.failures += 1
                        entry.status = .failed(error, retryAt: now + backOff(failures: entry.failures))
                        state.devices[device] = entry
                        notes.append(error.message)
                        continue
                    }
                }
                let contexts = [opened] + entry.moreContexts
                let given = contexts[entry.leasesGiven % contexts.count]
                entry.leasesGiven &+= 1
                entry.sessions += 1
                state.devices[device] = entry
                return .success(HardwareDeviceLease(device: device, opened: given, pool: self))
            }
            return .failure(DecodeError(.decoderUnavailable, "no device opened (\(notes.joined(separator: "; ")))"))
        }
    }

    private func backOff(failures: Int) -> UInt64 {
        let first = retryDelay.nanoseconds
        let cap = maxRetryDelay.nanoseconds
        let doublings = UInt64(min(max(failures - 1, 0), 30))
        let (delay, overflow) = first.multipliedReportingOverflow(by: 1 << doublings)
        return overflow ? cap : min(delay, cap)
    }

    fileprivate func release(_ device: HardwareDeviceID) {
        state.withLock { state in
            guard var entry = state.devices[device] else { return }
            entry.sessions = max(0, entry.sessions - 1)
            state.devices[device] = entry
        }
    }

    /// Every device the pool has been asked about, in first-seen order, with its state and the
    /// number of decoders (sessions) it holds now.
    public func usage() -> [HardwareDeviceUsage] {
        let now = clock.uptime
        return state.withLock { state in
            state.order.compactMap { device in
                guard let entry = state.devices[device] else { return nil }
                var usage = HardwareDeviceUsage(device: device, state: .notOpened, sessions: entry.sessions)
                switch entry.status {
                case .notOpened:
                    break
                case .open(let opened):
                    usage.state = .open
                    usage.name = opened.name
                case .failed(let error, let retryAt):
                    usage.state = .failed
                    usage.error = error.message
                    usage.retryInSeconds = retryAt > now ? Double(retryAt - now) / 1e9 : 0
                }
                return usage
            }
        }
    }

    /// Decoders on `device` now.
    public func sessions(on device: HardwareDeviceID) -> Int {
        state.withLock { $0.devices[device]?.sessions ?? 0 }
    }
}

/// A decoder's claim on a device: counted by the pool while it lives, released in deinit.
public final class HardwareDeviceLease: Sendable {
    public let device: HardwareDeviceID
    public let opened: OpenedHardwareDevice
    private let pool: HardwareDevicePool

    fileprivate init(device: HardwareDeviceID, opened: OpenedHardwareDevice, pool: HardwareDevicePool) {
        self.device = device
        self.opened = opened
        self.pool = pool
    }

    deinit { pool.release(device) }

    /// What the device decodes of `codec`; nil when it does not decode that codec.
    public func capability(for codec: VideoCodec) -> HardwareCapability? { opened.capabilities[codec] }

    /// "NVDEC on cuda:0 (NVIDIA H100 80GB HBM3)", "VA-API on /dev/dri/renderD128".
    public var summary: String {
        "\(device.kind.engineName) on \(device)" + (opened.name.map { " (\($0))" } ?? "")
    }
}

/// One device as `HardwareDevicePool.usage()` reports it (for `/system` and `/metrics`).
public struct HardwareDeviceUsage: Sendable, Equatable {
    public enum State: String, Sendable {
        case open
        case failed
        /// Known (listed or reported by the driver) but no decoder has needed it yet.
        case notOpened = "not_opened"
    }

    public var device: HardwareDeviceID
    public var kind: HardwareDeviceKind { device.kind }
    public var name: String?
    public var state: State
    /// Decoders (one per session) holding the device now.
    public var sessions: Int
    /// Why the last open failed.
    public var error: String?
    /// Seconds until a failed device is tried again.
    public var retryInSeconds: Double?

    public init(
        device: HardwareDeviceID, name: String? = nil, state: State, sessions: Int, error: String? = nil,
        retryInSeconds: Double? = nil
    ) {
        self.device = device
        self.name = name
        self.state = state
        self.sessions = sessions
        self.error = error
        self.retryInSeconds = retryInSeconds
    }
}
