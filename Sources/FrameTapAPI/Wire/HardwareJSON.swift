import Decoding

/// The decoding hardware as GET /system's `hardware` object and `frametap probe --hardware`
/// show it: a published contract (openapi.yaml, `additionalProperties: false`). Every member is
/// always there, with explicit nulls, in each of these objects.
public struct HardwareReportJSON: Encodable {
    let report: HardwareReport

    public init(_ report: HardwareReport) { self.report = report }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(report.libavcodecVersion, forKey: .libavcodecVersion)
        try container.encode(report.libavcodecVAAPI, forKey: .libavcodecVAAPI)
        try container.encode(report.vaapiHeaderVersion, forKey: .vaapiHeaderVersion)
        try container.encode(report.renderNodes.map(RenderNodeJSON.init), forKey: .renderNodes)
        try container.encode(CUDAReportJSON(report.cuda), forKey: .cuda)
    }

    private enum Key: String, CodingKey { case libavcodecVersion, libavcodecVAAPI, vaapiHeaderVersion, renderNodes, cuda }
}

/// One DRM render node, the H.264 and H.265 profiles libva lists for it, and what FrameTap decodes there.
struct RenderNodeJSON: Encodable {
    let node: RenderNodeReport

    init(_ node: RenderNodeReport) { self.node = node }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(node.path, forKey: .path)
        try container.encode(node.vendor, forKey: .vendor)
        try container.encode(node.vaapiVersion, forKey: .vaapiVersion)
        try container.encode(node.h264Profiles, forKey: .h264Profiles)
        try container.encode(node.hevcProfiles, forKey: .hevcProfiles)
        try container.encode(node.capabilities.map(HardwareCapabilityJSON.init), forKey: .codecs)
        try container.encode(node.usable, forKey: .usable)
        try container.encode(node.error, forKey: .error)
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
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(capability.codec.rawValue, forKey: .codec)
        try container.encode(capability.maxBitDepth, forKey: .maxBitDepth)
        let chroma = capability.chromaFormats.sorted().map { ["4:0:0", "4:2:0", "4:2:2", "4:4:4"][$0] }
        try container.encode(chroma, forKey: .chromaFormats)
        try container.encode(capability.maxCodedWidth, forKey: .maxCodedWidth)
        try container.encode(capability.maxCodedHeight, forKey: .maxCodedHeight)
    }

    private enum Key: String, CodingKey { case codec, maxBitDepth, chromaFormats, maxCodedWidth, maxCodedHeight }
}

/// The CUDA driver and its devices (the `cuda` member of the hardware object).
public struct CUDAReportJSON: Encodable {
    let report: CUDAReport

    public init(_ report: CUDAReport) { self.report = report }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(report.libavcodecNVDEC, forKey: .libavcodecNVDEC)
        try container.encode(report.driverVersion, forKey: .driverVersion)
        try container.encode(report.error, forKey: .error)
        try container.encode(report.devices.map(CUDADeviceJSON.init), forKey: .devices)
    }

    private enum Key: String, CodingKey { case libavcodecNVDEC, driverVersion, error, devices }
}

/// One NVIDIA GPU as the driver describes it, and what NVDEC decodes there; `opened` is `null`
/// when opening was not tried.
struct CUDADeviceJSON: Encodable {
    let device: CUDADeviceReport

    init(_ device: CUDADeviceReport) { self.device = device }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(device.device.description, forKey: .device)
        try container.encode(device.index, forKey: .index)
        try container.encode(device.name, forKey: .name)
        try container.encode(device.totalMemoryBytes, forKey: .totalMemoryBytes)
        try container.encode(device.opened, forKey: .opened)
        try container.encode(device.capabilities.map(HardwareCapabilityJSON.init), forKey: .codecs)
        try container.encode(device.usable, forKey: .usable)
        try container.encode(device.error, forKey: .error)
    }

    private enum Key: String, CodingKey { case device, index, name, totalMemoryBytes, opened, codecs, usable, error }
}

/// One device sessions may decode on, and how many do (GET /system's `devices`, openapi.yaml
/// `HardwareDeviceUsage`, and `frametap probe --hardware`).
public struct HardwareDeviceUsageJSON: Encodable {
    let usage: HardwareDeviceUsage

    public init(_ usage: HardwareDeviceUsage) { self.usage = usage }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(usage.device.description, forKey: .device)
        try container.encode(usage.kind.rawValue, forKey: .kind)
        try container.encode(usage.name, forKey: .name)
        try container.encode(usage.state.rawValue, forKey: .state)
        try container.encode(usage.sessions, forKey: .sessions)
        try container.encode(usage.error, forKey: .error)
        try container.encode(usage.retryInSeconds, forKey: .retryInSeconds)
    }

    private enum Key: String, CodingKey { case device, kind, name, state, sessions, error, retryInSeconds }
}
