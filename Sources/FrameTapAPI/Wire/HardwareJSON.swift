import Decoding

/// The decoding hardware as GET /system's `hardware` object and `frametap probe --hardware`
/// show it: a published contract (openapi.yaml, `additionalProperties: false`). Every member is
/// always there, with explicit nulls, in each of these objects.
public struct HardwareReportJSON: Encodable {
    let report: HardwareReport

    public init(_ report: HardwareReport) { self.report = report }

    public func encode(to encoder: any Encoder) throws {
        try encoder.encodeObject(Key.self, [
            .libavcodecVersion: report.libavcodecVersion,
            .libavcodecVAAPI: report.libavcodecVAAPI,
            .vaapiHeaderVersion: report.vaapiHeaderVersion,
            .renderNodes: report.renderNodes.map(RenderNodeJSON.init),
            .cuda: CUDAReportJSON(report.cuda),
        ])
    }

    private enum Key: String, CodingKey { case libavcodecVersion, libavcodecVAAPI, vaapiHeaderVersion, renderNodes, cuda }
}

/// One DRM render node, the H.264 and H.265 profiles libva lists for it, and what FrameTap decodes there.
struct RenderNodeJSON: Encodable {
    let node: RenderNodeReport

    init(_ node: RenderNodeReport) { self.node = node }

    func encode(to encoder: any Encoder) throws {
        try encoder.encodeObject(Key.self, [
            .path: node.path,
            .vendor: node.vendor,
            .vaapiVersion: node.vaapiVersion,
            .h264Profiles: node.h264Profiles,
            .hevcProfiles: node.hevcProfiles,
            .codecs: node.capabilities.map(HardwareCapabilityJSON.init),
            .usable: node.usable,
            .error: node.error,
        ])
    }

    private enum Key: String, CodingKey { case path, vendor, vaapiVersion, h264Profiles, hevcProfiles, codecs, usable, error }
}

/// What a device decodes of one codec (openapi.yaml `HardwareCodec`): the limits FrameTap checks
/// against each stream's SPS before sending it there; `maxCodedWidth`/`maxCodedHeight` are `null`
/// where the driver alone decides.
struct HardwareCapabilityJSON: Encodable {
    let capability: HardwareCapability

    init(_ capability: HardwareCapability) { self.capability = capability }

    func encode(to encoder: any Encoder) throws {
        let chroma = capability.chromaFormats.sorted().map { ["4:0:0", "4:2:0", "4:2:2", "4:4:4"][$0] }
        try encoder.encodeObject(Key.self, [
            .codec: capability.codec.rawValue,
            .maxBitDepth: capability.maxBitDepth,
            .chromaFormats: chroma,
            .maxCodedWidth: capability.maxCodedWidth,
            .maxCodedHeight: capability.maxCodedHeight,
        ])
    }

    private enum Key: String, CodingKey { case codec, maxBitDepth, chromaFormats, maxCodedWidth, maxCodedHeight }
}

/// The CUDA driver and its devices (the `cuda` member of the hardware object).
public struct CUDAReportJSON: Encodable {
    let report: CUDAReport

    public init(_ report: CUDAReport) { self.report = report }

    public func encode(to encoder: any Encoder) throws {
        try encoder.encodeObject(Key.self, [
            .libavcodecNVDEC: report.libavcodecNVDEC,
            .driverVersion: report.driverVersion,
            .error: report.error,
            .devices: report.devices.map(CUDADeviceJSON.init),
        ])
    }

    private enum Key: String, CodingKey { case libavcodecNVDEC, driverVersion, error, devices }
}

/// One NVIDIA GPU as the driver describes it, and what NVDEC decodes there; `opened` is `null`
/// when opening was not tried.
struct CUDADeviceJSON: Encodable {
    let device: CUDADeviceReport

    init(_ device: CUDADeviceReport) { self.device = device }

    func encode(to encoder: any Encoder) throws {
        try encoder.encodeObject(Key.self, [
            .device: device.device.description,
            .index: device.index,
            .name: device.name,
            .totalMemoryBytes: device.totalMemoryBytes,
            .opened: device.opened,
            .codecs: device.capabilities.map(HardwareCapabilityJSON.init),
            .usable: device.usable,
            .error: device.error,
        ])
    }

    private enum Key: String, CodingKey { case device, index, name, totalMemoryBytes, opened, codecs, usable, error }
}

/// One device sessions may decode on, and how many do (GET /system's `devices`, openapi.yaml
/// `HardwareDeviceUsage`, and `frametap probe --hardware`).
public struct HardwareDeviceUsageJSON: Encodable {
    let usage: HardwareDeviceUsage

    public init(_ usage: HardwareDeviceUsage) { self.usage = usage }

    public func encode(to encoder: any Encoder) throws {
        try encoder.encodeObject(Key.self, [
            .device: usage.device.description,
            .kind: usage.kind.rawValue,
            .name: usage.name,
            .state: usage.state.rawValue,
            .sessions: usage.sessions,
            .error: usage.error,
            .retryInSeconds: usage.retryInSeconds,
        ])
    }

    private enum Key: String, CodingKey { case device, kind, name, state, sessions, error, retryInSeconds }
}
