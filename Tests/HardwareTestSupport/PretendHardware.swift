import Decoding
import Foundation
import Synchronization
import VideoCoding
import Timekeeping

// Pretend decoding hardware for tests on machines without a GPU (CI has none): a platform that
// lists and opens devices that do not exist, and decoders that report themselves as NVDEC or
// VA-API while a real software decoder does the work, failing where a test says.

/// A machine with no decoding hardware at all: no NVIDIA driver, no render node.
public struct NoHardware: HardwarePlatform {
    public init() {}

    public func cudaDevices() -> Result<[Int], DecodeError> {
        .failure(DecodeError(.decoderUnavailable, "no NVIDIA driver in this test"))
    }
    public func renderNodes() -> [String] { [] }
    public func open(_ device: HardwareDeviceID) -> Result<OpenedHardwareDevice, DecodeError> {
        .failure(DecodeError(.decoderUnavailable, "\(device): nothing to open in this test"))
    }
}

/// A machine that pretends to have the given devices. Devices in `failing` do not open (with
/// that message) until `heal` is called; every open is counted, so tests can check that each
/// device gets one context and that a failed one is not retried before its back-off ends.
public final class PretendPlatform: HardwarePlatform {
    public let cuda: [Int]
    public let nodes: [String]
    public let cudaCapability: HardwareCapability
    /// What each render node decodes (as `RenderNodeReport.capabilities` derives it from the
    /// profiles libva lists).
    public let vaapiCapabilities: [HardwareCapability]
    private let state: Mutex<(failing: [HardwareDeviceID: String], opens: [HardwareDeviceID: Int])>

    public init(
        cuda: [Int] = [], renderNodes: [String] = [], failing: [HardwareDeviceID: String] = [:],
        cudaCapability: HardwareCapability = .nvdecH264, vaapiCapabilities: [HardwareCapability] = [.vaapiH264, .vaapiHEVC]
    ) {
        self.cuda = cuda
        self.nodes = renderNodes
        self.cudaCapability = cudaCapability
        self.vaapiCapabilities = vaapiCapabilities
        state = Mutex((failing, [:]))
    }

    public func cudaDevices() -> Result<[Int], DecodeError> {
        cuda.isEmpty ? .failure(DecodeError(.decoderUnavailable, "the pretend driver reports no device")) : .success(cuda)
    }

    public func renderNodes() -> [String] { nodes }

    public func open(_ device: HardwareDeviceID) -> Result<OpenedHardwareDevice, DecodeError> {
        let failure: String? = state.withLock { state in
            state.opens[device, default: 0] += 1
            return state.failing[device]
        }
        if let failure { return .failure(DecodeError(.decoderUnavailable, "\(device): \(failure)")) }
        return .success(OpenedHardwareDevice(
            context: .placeholder(),
            capabilities: device.kind == .cuda ? [cudaCapability, .nvdecHEVC] : vaapiCapabilities,
            name: "Pretend \(device.kind.displayName) \(device.address)"))
    }

    public func opens(of device: HardwareDeviceID) -> Int { state.withLock { $0.opens[device] ?? 0 } }

    public func heal(_ device: HardwareDeviceID) { _ = state.withLock { $0.failing.removeValue(forKey: device) } }
}

public final class Tally: Sendable {
    private let count = Atomic<Int>(0)
    public init() {}
    public func add() { count.add(1, ordering: .relaxed) }
    public var value: Int { count.load(ordering: .relaxed) }
}

/// Reports itself as the plan's hardware back end (CUDA, VA-API) but decodes in software with a
/// real `LibavDecoder` inside. Access units `failing(n)` picks (1-based) fail as device errors
/// and are not decoded, like an NVDEC call that errors out; with `refusal`, every access unit
/// from the `refusalFrom`th on is turned down the way libavcodec's `get_format` turns a stream
/// down (no hardware format, hwaccel init failed), and the ones before it are taken without a
/// picture (libavcodec's frame threads report the first picture's refusal with a later packet). Like a hardware pipeline it hands each picture out one call late (only
/// `drain` empties it), so a caller that switches decoders without draining loses a picture.
/// With `insideSoftware`, it says with its first picture that libavcodec decoded in software
/// inside it (`DecodeOutput.decodedInSoftware`).
public final class PretendHardwareDecoder: PictureDecoder {
    public let codec: VideoCodec
    public let options: DecoderOptions
    private let plan: DecoderPlan
    private let inner: LibavDecoder
    private let failing: @Sendable (Int) -> Bool
    private let refusal: HardwareCapability.Refusal?
    private let refusalFrom: Int
    private let insideSoftware: HardwareCapability.Refusal?
    private let tally: Tally?
    private let produced: Tally?
    private var delayed: [DecodedFrame] = []
    private var saidInsideSoftware = false
    public private(set) var accessUnits = 0
    private var failures = 0
    public private(set) var lastError: DecodeError?

    init(
        plan: DecoderPlan, codec: VideoCodec, options: DecoderOptions, failing: @escaping @Sendable (Int) -> Bool,
        refusal: HardwareCapability.Refusal?, refusalFrom: Int, insideSoftware: HardwareCapability.Refusal? = nil,
        counting tally: Tally?, producing produced: Tally?
    ) throws(DecodeError) {
        self.refusalFrom = refusalFrom
        self.insideSoftware = insideSoftware
        self.codec = codec
        self.options = options
        self.plan = plan
        self.failing = failing
        self.refusal = refusal
        self.tally = tally
        self.produced = produced
        var innerOptions = options
        innerOptions.backend = .software
        inner = try LibavDecoder(
            codec: codec, options: innerOptions,
            plan: DecoderPlan(backend: .software, reason: "inside"))
    }

    public var backend: DecoderBackend { plan.backend }
    public var framesDecoded: UInt64 { inner.framesDecoded }
    public var decodeErrors: Int { inner.decodeErrors + failures }
    public var isProbingReorderDelay: Bool { inner.isProbingReorderDelay }
    public func endReorderProbe() -> DecodeOutput { inner.endReorderProbe() }

    public func decode(accessUnit bytes: UnsafeRawBufferPointer, pts: Int64?, index: Int64?) -> DecodeOutput {
        accessUnits += 1
        tally?.add()
        if let refusal {
            var output = DecodeOutput()
            if accessUnits >= refusalFrom { output.hardwareRefusal = refusal }
            return output
        }
        guard !failing(accessUnits) else {
            failures += 1
            let error = DecodeError(.decoderFailure, "pretend NVDEC failure at access unit \(accessUnits)")
            lastError = error
            var output = DecodeOutput()
            output.errors = [error]
            return output
        }
        var output = inner.decode(accessUnit: bytes, pts: pts, index: index)
        for _ in output.frames { produced?.add() }
        delayed += output.frames
        output.frames = delayed.count > 1 ? Array(delayed.dropLast()) : []
        delayed = Array(delayed.suffix(1))
        if let insideSoftware, !output.frames.isEmpty, !saidInsideSoftware {
            saidInsideSoftware = true
            output.decodedInSoftware = insideSoftware
        }
        return output
    }

    public func drain() -> DecodeOutput {
        var output = inner.drain()
        for _ in output.frames { produced?.add() }
        output.frames = delayed + output.frames
        delayed = []
        return output
    }
}

/// Makes `PretendHardwareDecoder`s for hardware plans (or fails to, with `failOpen`) and real
/// software decoders for software plans; counts the access units sent to pretend hardware.
public final class PretendHardwareFactory: PictureDecoderFactory {
    public let failOpen: Bool
    public let failing: @Sendable (Int) -> Bool
    public let refusal: HardwareCapability.Refusal?
    public let refusalFrom: Int
    /// Said with the first picture, as `LibavDecoder` says it when libavcodec decodes in
    /// software inside a hardware decoder.
    public let insideSoftware: HardwareCapability.Refusal?
    public let hardwareAccessUnits = Tally()
    public let hardwareDecodersMade = Tally()
    /// Pictures the pretend hardware decoded (handed out or still held).
    public let hardwareFrames = Tally()

    public init(
        failOpen: Bool = false, failing: @escaping @Sendable (Int) -> Bool = { _ in false },
        refusal: HardwareCapability.Refusal? = nil, refusalFrom: Int = 1, insideSoftware: HardwareCapability.Refusal? = nil
    ) {
        self.refusalFrom = refusalFrom
        self.insideSoftware = insideSoftware
        self.failOpen = failOpen
        self.failing = failing
        self.refusal = refusal
    }

    public func makeDecoder(_ plan: DecoderPlan, codec: VideoCodec, options: DecoderOptions) throws(DecodeError)
        -> any PictureDecoder
    {
        guard plan.backend != .software else {
            return try LibavDecoderFactory().makeDecoder(plan, codec: codec, options: options)
        }
        if failOpen { throw DecodeError(.decoderFailure, "the pretend NVDEC decoder did not start") }
        hardwareDecodersMade.add()
        return try PretendHardwareDecoder(
            plan: plan, codec: codec, options: options, failing: failing, refusal: refusal, refusalFrom: refusalFrom,
            insideSoftware: insideSoftware, counting: hardwareAccessUnits,
            producing: hardwareFrames)
    }
}

extension DecoderOptions {
    /// Live decoding (no CLI probe) on a pretend machine.
    public static func pretend(
        _ backend: DecoderBackendChoice, _ platform: any HardwarePlatform, devices: HardwareDeviceList? = nil,
        pool: HardwareDevicePool? = nil
    ) -> DecoderOptions {
        var options = DecoderOptions.lowLatency(backend: backend)
        options.devicePool = pool ?? HardwareDevicePool(platform: platform, clock: SystemClock())
        options.hardwareDevices = devices
        options.frameDownloads = FrameDownloadCounter()
        return options
    }
}

