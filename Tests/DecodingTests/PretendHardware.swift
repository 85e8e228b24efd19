import Decoding
import Foundation
import Synchronization

/// A machine with no decoding hardware at all: no NVIDIA driver, no render node.
struct NoHardware: HardwarePlatform {
    func cudaDevices() -> Result<[Int], DecodeError> {
        .failure(DecodeError(.decoderUnavailable, "no NVIDIA driver in this test"))
    }
    func renderNodes() -> [String] { [] }
    func open(_ device: HardwareDeviceID) -> Result<OpenedHardwareDevice, DecodeError> {
        .failure(DecodeError(.decoderUnavailable, "\(device): nothing to open in this test"))
    }
}

/// A machine that pretends to have the given devices. Devices in `failing` do not open (with
/// that message) until `heal` is called; every open is counted, so tests can check that each
/// device gets one context and that a failed one is not retried before its back-off ends.
final class PretendPlatform: HardwarePlatform {
    let cuda: [Int]
    let nodes: [String]
    let cudaCapability: HardwareCapability
    private let state: Mutex<(failing: [HardwareDeviceID: String], opens: [HardwareDeviceID: Int])>

    init(
        cuda: [Int] = [], renderNodes: [String] = [], failing: [HardwareDeviceID: String] = [:],
        cudaCapability: HardwareCapability = .nvdecH264
    ) {
        self.cuda = cuda
        self.nodes = renderNodes
        self.cudaCapability = cudaCapability
        state = Mutex((failing, [:]))
    }

    func cudaDevices() -> Result<[Int], DecodeError> {
        cuda.isEmpty ? .failure(DecodeError(.decoderUnavailable, "the pretend driver reports no device")) : .success(cuda)
    }

    func renderNodes() -> [String] { nodes }

    func open(_ device: HardwareDeviceID) -> Result<OpenedHardwareDevice, DecodeError> {
        let failure: String? = state.withLock { state in
            state.opens[device, default: 0] += 1
            return state.failing[device]
        }
        if let failure { return .failure(DecodeError(.decoderUnavailable, "\(device): \(failure)")) }
        return .success(OpenedHardwareDevice(
            context: .placeholder(), capability: device.kind == .cuda ? cudaCapability : .vaapiH264,
            name: "Pretend \(device.kind.displayName) \(device.address)"))
    }

    func opens(of device: HardwareDeviceID) -> Int { state.withLock { $0.opens[device] ?? 0 } }

    func heal(_ device: HardwareDeviceID) { _ = state.withLock { $0.failing.removeValue(forKey: device) } }
}

final class Tally: Sendable {
    private let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

/// Monotonic time that moves only when a test says so.
final class ManualClock: Sendable {
    private let nanoseconds = Atomic<UInt64>(1_000_000_000)
    func advance(seconds: Double) { nanoseconds.add(UInt64(seconds * 1e9), ordering: .relaxed) }
    var now: @Sendable () -> UInt64 { { self.nanoseconds.load(ordering: .relaxed) } }
}

/// Reports itself as the plan's hardware back end (CUDA, VA-API) but decodes in software with a
/// real `H264Decoder` inside. Access units `failing(n)` picks (1-based) fail as device errors
/// and are not decoded, like an NVDEC call that errors out. Like a hardware pipeline it hands
/// each picture out one call late (only `drain` empties it), so a caller that switches
/// decoders without draining loses a picture.
final class PretendHardwareDecoder: PictureDecoder {
    let options: DecoderOptions
    private let plan: DecoderPlan
    private let inner: H264Decoder
    private let failing: @Sendable (Int) -> Bool
    private let tally: Tally?
    private let produced: Tally?
    private var delayed: [DecodedFrame] = []
    private(set) var accessUnits = 0
    private var failures = 0
    private(set) var lastError: DecodeError?

    init(
        plan: DecoderPlan, options: DecoderOptions, failing: @escaping @Sendable (Int) -> Bool, counting tally: Tally?,
        producing produced: Tally?
    ) throws(DecodeError) {
        self.options = options
        self.plan = plan
        self.failing = failing
        self.tally = tally
        self.produced = produced
        var innerOptions = options
        innerOptions.backend = .software
        inner = try H264Decoder(
            options: innerOptions, plan: DecoderPlan(backend: .software, reason: "inside", firstSequence: plan.firstSequence))
    }

    var backend: DecoderBackend { plan.backend }
    var backendReason: String { plan.reason }
    var device: HardwareDeviceID? { plan.lease?.device }
    var hardwareCapability: HardwareCapability? { plan.lease?.capability }
    var fallbacks: [BackendFallback] { plan.fallbacks }
    var framesDecoded: UInt64 { inner.framesDecoded }
    var decodeErrors: Int { inner.decodeErrors + failures }
    var isProbingReorderDelay: Bool { inner.isProbingReorderDelay }
    func endReorderProbe() -> DecodeOutput { inner.endReorderProbe() }

    func decode(accessUnit bytes: UnsafeRawBufferPointer, pts: Int64?) -> DecodeOutput {
        accessUnits += 1
        tally?.add()
        guard !failing(accessUnits) else {
            failures += 1
            let error = DecodeError(.decoderFailure, "pretend NVDEC failure at access unit \(accessUnits)")
            lastError = error
            var output = DecodeOutput()
            output.errors = [error]
            return output
        }
        var output = inner.decode(accessUnit: bytes, pts: pts)
        for _ in output.frames { produced?.add() }
        delayed += output.frames
        output.frames = delayed.count > 1 ? Array(delayed.dropLast()) : []
        delayed = Array(delayed.suffix(1))
        return output
    }

    func drain() -> DecodeOutput {
        var output = inner.drain()
        for _ in output.frames { produced?.add() }
        output.frames = delayed + output.frames
        delayed = []
        return output
    }
}

/// Makes `PretendHardwareDecoder`s for hardware plans (or fails to, with `failOpen`) and real
/// software decoders for software plans; counts the access units sent to pretend hardware.
final class PretendHardwareFactory: PictureDecoderFactory {
    let failOpen: Bool
    let failing: @Sendable (Int) -> Bool
    let hardwareAccessUnits = Tally()
    let hardwareDecodersMade = Tally()
    /// Pictures the pretend hardware decoded (handed out or still held).
    let hardwareFrames = Tally()

    init(failOpen: Bool = false, failing: @escaping @Sendable (Int) -> Bool = { _ in false }) {
        self.failOpen = failOpen
        self.failing = failing
    }

    func makeDecoder(_ plan: DecoderPlan, options: DecoderOptions) throws(DecodeError) -> any PictureDecoder {
        guard plan.backend != .software else { return try LibavDecoderFactory().makeDecoder(plan, options: options) }
        if failOpen { throw DecodeError(.decoderFailure, "the pretend NVDEC decoder did not start") }
        hardwareDecodersMade.add()
        return try PretendHardwareDecoder(
            plan: plan, options: options, failing: failing, counting: hardwareAccessUnits, producing: hardwareFrames)
    }
}

extension DecoderOptions {
    /// Live decoding (no CLI probe) on a pretend machine.
    static func pretend(
        _ backend: DecoderBackendChoice, _ platform: any HardwarePlatform, devices: HardwareDeviceList? = nil,
        pool: HardwareDevicePool? = nil
    ) -> DecoderOptions {
        var options = DecoderOptions.lowLatency(backend: backend)
        options.devicePool = pool ?? HardwareDevicePool(platform: platform)
        options.hardwareDevices = devices
        options.frameDownloads = FrameDownloadCounter()
        return options
    }
}

enum Fixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Fixtures").standardizedFileURL

    static func bytes(_ name: String) throws -> [UInt8] {
        try TestSupport.bytes(of: directory.appendingPathComponent(name))
    }

    /// The manifest's MD5 of a fixture's raw pictures.
    static func md5(_ name: String) -> String? {
        ConformanceStream.fixtures.first { $0.file == name }?.yuvMD5
    }
}

/// Pushes a whole stream through `decoder` in 4 KiB pieces, then finishes it.
func pushAll(_ bytes: [UInt8], into decoder: StreamDecoder) -> DecodeOutput {
    var all = DecodeOutput()
    var offset = 0
    while offset < bytes.count {
        let end = min(bytes.count, offset + 4096)
        let output = decoder.push(Array(bytes[offset..<end]))
        all.frames += output.frames
        all.errors += output.errors
        offset = end
    }
    let tail = decoder.finish()
    all.frames += tail.frames
    all.errors += tail.errors
    return all
}
