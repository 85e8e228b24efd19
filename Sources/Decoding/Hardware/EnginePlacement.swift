import FoundationEssentials
import Synchronization
import Timekeeping
import VideoCoding

/// Where decoding work can run: one hardware device (its NVDEC or VA-API engine) or the CPU.
public enum EngineID: Hashable, Sendable, CustomStringConvertible {
    case cpu
    case device(HardwareDeviceID)

    /// "cpu", "cuda:0", "/dev/dri/renderD128": the spelling of `--engine-capacity` and the metrics' label.
    public var description: String {
        switch self {
        case .cpu: "cpu"
        case .device(let device): device.description
        }
    }

    /// "the CPU", "NVDEC on cuda:0": for reasons.
    public var displayName: String {
        switch self {
        case .cpu: "the CPU"
        case .device(let device): "\(device.kind.engineName) on \(device)"
        }
    }

    /// Parses `cpu`, `cuda:N` or a render node path.
    public init(parsing text: String) throws(DecodeError) {
        if text == "cpu" {
            self = .cpu
            return
        }
        let list = try HardwareDeviceList(parsing: text)
        guard list.entries.count == 1, case .device(let device) = list.entries[0] else {
            throw DecodeError(.invalidOptions, "engine \"\(text)\": expected cpu, cuda:N or a render node path")
        }
        self = .device(device)
    }
}

/// Decoding rates are counted in 1080p-equivalent pictures per second: pixels per second over
/// 1920×1080, so a 1080p30 stream needs 30 and a 4K30 one 120.
public enum EngineRate {
    public static let pixelsOf1080p = 1920.0 * 1080.0
}

/// How fast an engine decodes each codec, in 1080p-equivalent pictures per second, and where
/// the figures came from.
public struct EngineCapacity: Sendable, Equatable {
    public var fps: [VideoCodec: Double]
    /// "default: 16 cores × 118 fps", "configured": shown next to the figures.
    public var source: String

    public init(fps: [VideoCodec: Double], source: String) {
        self.fps = fps
        self.source = source
    }

    /// Measured on an H200 inside one server: 16 streams of 1080p H.264, 480 pictures each, at
    /// 3,491 fps together (BENCHMARKS.md "GPU rows", G1x). H.265 keeps the ratio NVDEC showed
    /// between the codecs with one process per stream (1,429 against 1,264 fps).
    public static let nvdec = EngineCapacity(fps: [.h264: 3400, .h265: 3800], source: "default for NVDEC (H200)")
    /// Not measured: a conservative guess for an integrated GPU; set it with `--engine-capacity`.
    public static let vaapi = EngineCapacity(fps: [.h264: 300, .h265: 300], source: "default for VA-API (unmeasured)")
    /// libavcodec's software decoder with one thread per stream, per core, measured on the GPU
    /// hosts' cores (16 cores: 1,895 fps of H.264).
    public static let softwarePerCore: [VideoCodec: Double] = [.h264: 118, .h265: 77]
    /// The share of the cores given to decoding: the rest ingest, convert and encode pictures,
    /// also those of the sessions decoded on a device.
    public static let cpuDecodingShare = 0.75

    public static func cpu(cores: Int) -> EngineCapacity {
        let usable = Double(max(1, cores)) * cpuDecodingShare
        return EngineCapacity(
            fps: softwarePerCore.mapValues { $0 * usable },
            source: "default: \(cpuDecodingShare) of \(max(1, cores)) cores × \(Int(softwarePerCore[.h264]!)) fps H.264, "
                + "\(Int(softwarePerCore[.h265]!)) fps H.265 per core")
    }

    public static func `default`(for engine: EngineID, cores: Int) -> EngineCapacity {
        switch engine {
        case .cpu: .cpu(cores: cores)
        case .device(let device): device.kind == .cuda ? .nvdec : .vaapi
        }
    }

    /// The rate for `codec`; an engine without a figure for it counts as unable to decode it.
    public func rate(_ codec: VideoCodec) -> Double { fps[codec] ?? 0 }
}

/// Capacities set by the operator (`--engine-capacity cuda:0:h264=1200,cpu:h265=600`),
/// replacing the defaults codec by codec.
public struct EngineCapacityOverrides: Sendable, Equatable, CustomStringConvertible {
    public var entries: [EngineID: [VideoCodec: Double]]

    public static let syntax = "a comma-separated list of ENGINE:CODEC=FPS, ENGINE being cpu, cuda:N or a render node path, CODEC h264 or h265, FPS 1080p-equivalent pictures per second"

    public init(_ entries: [EngineID: [VideoCodec: Double]] = [:]) {
        self.entries = entries
    }

    public init(parsing text: String) throws(DecodeError) {
        var entries: [EngineID: [VideoCodec: Double]] = [:]
        for raw in text.split(separator: ",", omittingEmptySubsequences: false) {
            let item = raw.trimmingWhitespace()
            guard let equals = item.lastIndex(of: "="), let colon = item[..<equals].lastIndex(of: ":") else {
                throw DecodeError(.invalidOptions, "engine capacity \"\(item)\": expected \(Self.syntax)")
            }
            let engine = try EngineID(parsing: String(item[..<colon]))
            let codecName = item[item.index(after: colon)..<equals].lowercased()
            guard let codec: VideoCodec = codecName == "h264" ? .h264 : codecName == "h265" || codecName == "hevc" ? .h265 : nil
            else { throw DecodeError(.invalidOptions, "engine capacity \"\(item)\": the codec is h264 or h265") }
            guard let fps = Double(item[item.index(after: equals)...]), fps.isFinite, fps >= 0, fps <= 1_000_000 else {
                throw DecodeError(.invalidOptions, "engine capacity \"\(item)\": the rate is a number of pictures per second, 0...1000000")
            }
            entries[engine, default: [:]][codec] = fps
        }
        self.entries = entries
    }

    public var description: String {
        entries.sorted { $0.key.description < $1.key.description }.flatMap { engine, rates in
            rates.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\(engine):\($0.key.rawValue)=\($0.value)" }
        }.joined(separator: ",")
    }
}

/// What one stream asks of an engine.
public struct EngineDemand: Sendable, Equatable {
    public var codec: VideoCodec
    public var width: Int
    public var height: Int
    /// Pictures per second: measured from the stream once known, else the SPS's, else 30.
    public var frameRate: Double

    public static let assumedFrameRate = 30.0

    public init(codec: VideoCodec, width: Int, height: Int, frameRate: Double?) {
        self.codec = codec
        self.width = width
        self.height = height
        self.frameRate = frameRate.flatMap { $0.isFinite && $0 > 0 ? min($0, 1000) : nil } ?? Self.assumedFrameRate
    }

    /// 1080p-equivalent pictures per second.
    public var fps1080: Double { Double(width * height) * frameRate / EngineRate.pixelsOf1080p }
}

/// Places decoding sessions on engines by headroom, and moves them when an engine is overloaded:
/// a value that is told what happens (a session asks to be placed, decodes an access unit, ends)
/// and answers what to do, like async-http-client's state machines. Time comes in with each
/// call, so tests drive it with set capacities and a clock of their own.
///
/// - Load: an engine's utilization is the sum, over its sessions, of each one's demand over the
///   engine's capacity for that session's codec (so H.264 and H.265 sessions share an engine
///   fairly); its headroom for a codec is what is left of that capacity.
/// - Placing: a session goes to the candidate engine with the most headroom for its codec
///   (ties: the earlier candidate, hardware before the CPU).
/// - Moving: only at a keyframe, only when the session's engine is overloaded (utilization
///   above 1 with the sessions' measured rates), not within `minimumStay` of its last placement,
///   and only to an engine with headroom for the whole session; the load moves with it at
///   once, so one overload moves as few sessions as it takes.
public struct EnginePlacement: Sendable {
    public enum Action: Sendable, Equatable {
        case stay
        /// Decode from this keyframe on on `to`.
        case move(to: EngineID, reason: String)
    }

    public struct Decision: Sendable, Equatable {
        public var engine: EngineID
        /// "placed by headroom: NVDEC on cuda:0 1134 of 1264 fps (1080p H.264) left, the CPU 900 of 900 fps
        /// (1080p H.264) left", or "the only engine for it".
        public var reason: String
    }

    /// One engine as `/system` and `/metrics` show it.
    public struct Report: Sendable, Equatable {
        public var engine: EngineID
        public var capacity: EngineCapacity
        /// The sum of its sessions' demands, in 1080p-equivalent pictures per second.
        public var loadFPS: Double
        /// Busy share by the sessions' demands: above 1 is overloaded.
        public var utilization: Double
        public var sessions: Int
        /// Sessions moved away from it because it was overloaded.
        public var movedAway: Int

        public init(
            engine: EngineID, capacity: EngineCapacity, loadFPS: Double, utilization: Double, sessions: Int, movedAway: Int
        ) {
            self.engine = engine
            self.capacity = capacity
            self.loadFPS = loadFPS
            self.utilization = utilization
            self.sessions = sessions
            self.movedAway = movedAway
        }
    }

    private struct Engine {
        var capacity: EngineCapacity
        var movedAway = 0
    }

    private struct Placed {
        var engine: EngineID
        var demand: EngineDemand
        var candidates: [EngineID]
        /// A required back end's session counts in the load but never moves.
        var movable: Bool
        var placedAt: UInt64
        var sampleStart: UInt64
        var sampleUnits = 0
        var rateMeasured = false
        /// When its last access unit came: a stream silent for `idleAfter` loads nothing.
        var lastUnitAt: UInt64
    }

    private var engines: [EngineID: Engine] = [:]
    private var order: [EngineID] = []
    private var sessions: [UInt64: Placed] = [:]
    private var nextSession: UInt64 = 0
    private let cores: Int
    private var overrides: EngineCapacityOverrides
    /// A session stays at least this long where it was placed (no moving back and forth).
    public var minimumStay: UInt64
    /// The input rate is measured over windows of at least this long.
    public var rateWindow: UInt64
    /// A session that sent nothing for this long (a camera gone, a push paused) counts as no
    /// load until it sends again.
    public var idleAfter: UInt64
    /// The time of the latest event: what idleness is judged against.
    private var now: UInt64 = 0

    public init(
        cores: Int, overrides: EngineCapacityOverrides = EngineCapacityOverrides(), minimumStay: Duration = .seconds(10),
        rateWindow: Duration = .seconds(2), idleAfter: Duration = .seconds(5)
    ) {
        self.cores = cores
        self.overrides = overrides
        self.minimumStay = minimumStay.nanoseconds
        self.rateWindow = rateWindow.nanoseconds
        self.idleAfter = idleAfter.nanoseconds
        engine(.cpu)
    }

    /// Replaces the operator's capacities; engines already known take them now.
    public mutating func setOverrides(_ overrides: EngineCapacityOverrides) {
        self.overrides = overrides
        for id in order {
            let configured = capacity(of: id)
            engines[id]?.capacity = configured
        }
    }

    /// Sets an engine's capacity (a measurement, or a test's pretend engine).
    public mutating func setCapacity(_ capacity: EngineCapacity, of id: EngineID) {
        engine(id)
        engines[id]?.capacity = capacity
    }

    private func capacity(of id: EngineID) -> EngineCapacity {
        var capacity = EngineCapacity.default(for: id, cores: cores)
        if let configured = overrides.entries[id] {
            capacity.fps.merge(configured) { _, new in new }
            capacity.source = "configured"
        }
        return capacity
    }

    private mutating func engine(_ id: EngineID) {
        guard engines[id] == nil else { return }
        engines[id] = Engine(capacity: capacity(of: id))
        order.append(id)
    }

    // MARK: - Load

    public func utilization(of id: EngineID) -> Double {
        guard let engine = engines[id] else { return 0 }
        return sessions.values.reduce(0) { sum, placed in
            guard placed.engine == id else { return sum }
            let rate = engine.capacity.rate(placed.demand.codec)
            return sum + (rate > 0 ? load(of: placed) / rate : .infinity)
        }
    }

    /// A session's demand in 1080p-equivalent pictures per second; 0 while it is idle.
    private func load(of placed: Placed) -> Double {
        now &- placed.lastUnitAt > idleAfter && now > placed.lastUnitAt ? 0 : placed.demand.fps1080
    }

    /// Time passes without an event (a report is asked for).
    public mutating func advance(to now: UInt64) {
        self.now = max(self.now, now)
    }

    /// What is left of `id`'s capacity for `codec`, in 1080p-equivalent pictures per second.
    public func headroom(of id: EngineID, for codec: VideoCodec) -> Double {
        guard let engine = engines[id] else { return 0 }
        return max(0, 1 - utilization(of: id)) * engine.capacity.rate(codec)
    }

    // MARK: - Events

    /// A new session of `demand`, which may decode on any of `candidates` (in the order of
    /// preference on a tie), goes to the one with the most headroom; `movable` false pins it
    /// (a required back end, a single candidate). Returns its number and where it goes.
    public mutating func place(
        _ demand: EngineDemand, candidates: [EngineID], movable: Bool = true, now: UInt64
    ) -> (session: UInt64, decision: Decision) {
        advance(to: now)
        let candidates = candidates.isEmpty ? [.cpu] : candidates
        for id in candidates { engine(id) }
        let chosen = best(among: candidates, for: demand.codec)
        nextSession += 1
        sessions[nextSession] = Placed(
            engine: chosen, demand: demand, candidates: candidates, movable: movable && candidates.count > 1, placedAt: now,
            sampleStart: now, lastUnitAt: now)
        let why =
            candidates.count == 1
            ? "the only engine for it"
            : "placed by headroom: "
                + candidates.map { describeHeadroom($0, demand.codec, excluding: nextSession) }.joined(separator: ", ")
        return (nextSession, Decision(engine: chosen, reason: why))
    }

    /// The session ended (or its decoder closed): its load leaves its engine.
    public mutating func release(_ session: UInt64) {
        sessions[session] = nil
    }

    /// The stream's size or codec changed (a new SPS): its demand follows, the rate it measured stays.
    public mutating func describe(_ session: UInt64, as demand: EngineDemand) {
        guard var placed = sessions[session] else { return }
        let measured = placed.demand.frameRate
        placed.demand = demand
        if placed.rateMeasured { placed.demand.frameRate = measured }
        sessions[session] = placed
    }

    /// The session sent one access unit to its decoder. At a keyframe, an overloaded engine
    /// gives the session away when another has room for it.
    public mutating func accessUnit(_ session: UInt64, isKeyframe: Bool, now: UInt64) -> Action {
        advance(to: now)
        guard var placed = sessions[session] else { return .stay }
        if now &- placed.lastUnitAt > idleAfter, now > placed.lastUnitAt {
            // Back from a pause: the rate is measured afresh, not over the silence.
            placed.sampleStart = now
            placed.sampleUnits = 0
        }
        placed.lastUnitAt = now
        placed.sampleUnits += 1
        let elapsed = now &- placed.sampleStart
        if elapsed >= rateWindow, now > placed.sampleStart {
            placed.demand.frameRate = Double(placed.sampleUnits) * 1e9 / Double(elapsed)
            placed.sampleUnits = 0
            placed.sampleStart = now
            placed.rateMeasured = true
        }
        sessions[session] = placed
        guard isKeyframe, placed.movable, now &- placed.placedAt >= minimumStay else { return .stay }
        let from = placed.engine
        let load = utilization(of: from)
        guard load > 1 else { return .stay }
        let others = placed.candidates.filter { $0 != from }
        let target = best(among: others, for: placed.demand.codec)
        guard others.contains(target), headroom(of: target, for: placed.demand.codec) >= placed.demand.fps1080 else {
            return .stay
        }
        let reason =
            "moved from \(from.displayName) at a keyframe: it was overloaded (\(percent(load)) of its capacity); "
            + describeHeadroom(target, placed.demand.codec, excluding: session)
        placed.engine = target
        placed.placedAt = now
        sessions[session] = placed
        engines[from]?.movedAway += 1
        return .move(to: target, reason: reason)
    }

    /// The session's move to `engine` did not happen, or it went elsewhere on its own (a
    /// fallback to software): it counts where it decodes, and stays there when `pinned`.
    public mutating func settle(_ session: UInt64, on engine: EngineID, pinned: Bool, now: UInt64) {
        guard var placed = sessions[session] else { return }
        self.engine(engine)
        placed.engine = engine
        placed.placedAt = now
        if pinned { placed.movable = false }
        sessions[session] = placed
    }

    // MARK: - Reading

    /// Where `session` decodes now.
    public func engine(of session: UInt64) -> EngineID? { sessions[session]?.engine }

    /// Every engine, the CPU first, then devices as they were first seen.
    public func report() -> [Report] {
        order.compactMap { id in
            guard let engine = engines[id] else { return nil }
            let placed = sessions.values.filter { $0.engine == id }
            return Report(
                engine: id, capacity: engine.capacity, loadFPS: placed.reduce(0) { $0 + load(of: $1) },
                utilization: utilization(of: id), sessions: placed.count, movedAway: engine.movedAway)
        }
    }

    private func best(among candidates: [EngineID], for codec: VideoCodec) -> EngineID {
        var chosen = candidates.first ?? .cpu
        var most = -Double.infinity
        for id in candidates {
            let room = headroom(of: id, for: codec)
            if room > most {
                chosen = id
                most = room
            }
        }
        return chosen
    }

    /// "NVDEC on cuda:0 1,134 of 1,264 fps (1080p H.264) left", counted without `session` itself.
    private func describeHeadroom(_ id: EngineID, _ codec: VideoCodec, excluding session: UInt64) -> String {
        var without = self
        without.sessions[session] = nil
        let capacity = engines[id]?.capacity.rate(codec) ?? 0
        return "\(id.displayName) \(Int(without.headroom(of: id, for: codec).rounded())) of \(Int(capacity.rounded())) fps "
            + "(1080p \(codec.displayName)) left"
    }

    private func percent(_ share: Double) -> String { "\(Int((share * 100).rounded())) %" }
}

/// The process's placement (one per `HardwareDevicePool`), safe to share between sessions'
/// workers: `EnginePlacement` under a lock, on the pool's clock. A session's decoder holds an
/// `EngineTicket` for as long as it is placed.
public final class EnginePlacer: Sendable {
    private let state: Mutex<EnginePlacement>
    private let clock: any ServiceClock

    public init(placement: EnginePlacement, clock: any ServiceClock) {
        state = Mutex(placement)
        self.clock = clock
    }

    /// Default capacities for this machine's cores.
    public convenience init(clock: any ServiceClock) {
        self.init(placement: EnginePlacement(cores: ProcessInfo.processInfo.activeProcessorCount), clock: clock)
    }

    public func place(_ demand: EngineDemand, candidates: [EngineID], movable: Bool = true) -> (EngineTicket, EnginePlacement.Decision) {
        let now = clock.uptime
        let (session, decision) = state.withLock { $0.place(demand, candidates: candidates, movable: movable, now: now) }
        return (EngineTicket(session: session, placer: self), decision)
    }

    public func setOverrides(_ overrides: EngineCapacityOverrides) {
        state.withLock { $0.setOverrides(overrides) }
    }

    public func setCapacity(_ capacity: EngineCapacity, of engine: EngineID) {
        state.withLock { $0.setCapacity(capacity, of: engine) }
    }

    public func report() -> [EnginePlacement.Report] {
        let now = clock.uptime
        return state.withLock { placement in
            placement.advance(to: now)
            return placement.report()
        }
    }

    fileprivate func accessUnit(_ session: UInt64, isKeyframe: Bool) -> EnginePlacement.Action {
        let now = clock.uptime
        return state.withLock { $0.accessUnit(session, isKeyframe: isKeyframe, now: now) }
    }

    fileprivate func describe(_ session: UInt64, as demand: EngineDemand) {
        state.withLock { $0.describe(session, as: demand) }
    }

    fileprivate func settle(_ session: UInt64, on engine: EngineID, pinned: Bool) {
        let now = clock.uptime
        state.withLock { $0.settle(session, on: engine, pinned: pinned, now: now) }
    }

    fileprivate func release(_ session: UInt64) {
        state.withLock { $0.release(session) }
    }

    fileprivate func engine(of session: UInt64) -> EngineID? { state.withLock { $0.engine(of: session) } }
}

/// One decoder's place on an engine: its load counts there while the ticket lives.
public final class EngineTicket: Sendable {
    private let session: UInt64
    private let placer: EnginePlacer

    fileprivate init(session: UInt64, placer: EnginePlacer) {
        self.session = session
        self.placer = placer
    }

    deinit { placer.release(session) }

    public var engine: EngineID? { placer.engine(of: session) }

    /// One access unit goes to the decoder; at a keyframe the answer may be to move.
    public func accessUnit(isKeyframe: Bool) -> EnginePlacement.Action {
        placer.accessUnit(session, isKeyframe: isKeyframe)
    }

    public func describe(_ demand: EngineDemand) { placer.describe(session, as: demand) }

    /// See `EnginePlacement.settle`.
    public func settle(on engine: EngineID, pinned: Bool) { placer.settle(session, on: engine, pinned: pinned) }
}
