import Decoding

/// The decoding hardware as GET /system's `hardware` object and `frametap probe --hardware`
/// show it: a published contract (openapi.yaml, `additionalProperties: false`). Every member is
/// always there, with explicit nulls, in each of these objects.
public struct HardwareReportJSON: WireObject {
    let report: HardwareReport

    public init(_ report: HardwareReport) { self.report = report }

    public var members: KeyValuePairs<String, any Encodable> {
        [
            "libavcodecVersion": report.libavcodecVersion,
            "libavcodecVAAPI": report.libavcodecVAAPI,
            "vaapiHeaderVersion": report.vaapiHeaderVersion,
            "renderNodes": report.renderNodes.map(RenderNodeJSON.init),
            "cuda": CUDAReportJSON(report.cuda),
        ]
    }
}

/// One DRM render node, the H.264 and H.265 profiles libva lists for it, and what FrameTap decodes there.
struct RenderNodeJSON: WireObject {
    let node: RenderNodeReport

    init(_ node: RenderNodeReport) { self.node = node }

    var members: KeyValuePairs<String, any Encodable> {
        [
            "path": node.path,
            "vendor": node.vendor,
            "vaapiVersion": node.vaapiVersion,
            "h264Profiles": node.h264Profiles,
            "hevcProfiles": node.hevcProfiles,
            "codecs": node.capabilities.map(HardwareCapabilityJSON.init),
            "usable": node.usable,
            "error": node.error,
        ]
    }
}

/// What a device decodes of one codec (openapi.yaml `HardwareCodec`): the limits FrameTap checks
/// against each stream's SPS before sending it there; `maxCodedWidth`/`maxCodedHeight` are `null`
/// where the driver alone decides.
struct HardwareCapabilityJSON: WireObject {
    let capability: HardwareCapability

    init(_ capability: HardwareCapability) { self.capability = capability }

    var members: KeyValuePairs<String, any Encodable> {
        let chroma = capability.chromaFormats.sorted().map { ["4:0:0", "4:2:0", "4:2:2", "4:4:4"][$0] }
        return [
            "codec": capability.codec.rawValue,
            "maxBitDepth": capability.maxBitDepth,
            "chromaFormats": chroma,
            "maxCodedWidth": capability.maxCodedWidth,
            "maxCodedHeight": capability.maxCodedHeight,
        ]
    }
}

/// The CUDA driver and its devices (the `cuda` member of the hardware object).
public struct CUDAReportJSON: WireObject {
    let report: CUDAReport

    public init(_ report: CUDAReport) { self.report = report }

    public var members: KeyValuePairs<String, any Encodable> {
        [
            "libavcodecNVDEC": report.libavcodecNVDEC,
            "driverVersion": report.driverVersion,
            "error": report.error,
            "devices": report.devices.map(CUDADeviceJSON.init),
        ]
    }
}

/// One NVIDIA GPU as the driver describes it, and what NVDEC decodes there; `opened` is `null`
/// when opening was not tried.
struct CUDADeviceJSON: WireObject {
    let device: CUDADeviceReport

    init(_ device: CUDADeviceReport) { self.device = device }

    var members: KeyValuePairs<String, any Encodable> {
        [
            "device": device.device.description,
            "index": device.index,
            "name": device.name,
            "totalMemoryBytes": device.totalMemoryBytes,
            "opened": device.opened,
            "codecs": device.capabilities.map(HardwareCapabilityJSON.init),
            "usable": device.usable,
            "error": device.error,
        ]
    }
}

/// One device sessions may decode on, and how many do (GET /system's `devices`, openapi.yaml
/// `HardwareDeviceUsage`, and `frametap probe --hardware`).
public struct HardwareDeviceUsageJSON: WireObject {
    let usage: HardwareDeviceUsage

    public init(_ usage: HardwareDeviceUsage) { self.usage = usage }

    public var members: KeyValuePairs<String, any Encodable> {
        [
            "device": usage.device.description,
            "kind": usage.kind.rawValue,
            "name": usage.name,
            "state": usage.state.rawValue,
            "sessions": usage.sessions,
            "error": usage.error,
            "retryInSeconds": usage.retryInSeconds,
        ]
    }
}

/// One decoding engine (the CPU or a device) in `/system`'s `engines` (openapi.yaml `Engine`).
public struct EngineReportJSON: WireObject {
    let report: EnginePlacement.Report

    public init(_ report: EnginePlacement.Report) { self.report = report }

    public var members: KeyValuePairs<String, any Encodable> {
        let kind: String =
            switch report.engine {
            case .cpu: "cpu"
            case .device(let device): device.kind.rawValue
            }
        return [
            "engine": report.engine.description,
            "kind": kind,
            "capacityFps": Dictionary(uniqueKeysWithValues: report.capacity.fps.map { ($0.key.rawValue, $0.value) }),
            "capacitySource": report.capacity.source,
            "loadFps": report.loadFPS,
            "utilization": report.utilization,
            "sessions": report.sessions,
            "movedAway": report.movedAway,
        ]
    }
}
