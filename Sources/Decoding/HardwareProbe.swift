import CFFmpeg
import Foundation

/// What one DRM render node offers for H.264 decoding, as libva reports it.
public struct RenderNodeReport: Sendable, Equatable, Encodable {
    public var path: String
    /// `vaQueryVendorString`: the driver's own description, e.g.
    /// "Intel iHD driver for Intel(R) Gen Graphics - 23.1.1 ()" or "Mesa Gallium driver ... for AMD ...".
    public var vendor: String?
    /// The VA-API version the driver implements (`vaInitialize`'s major.minor).
    public var vaapiVersion: String?
    /// H.264 profiles with a decode (VLD) entry point, e.g. ["ConstrainedBaseline", "Main", "High"].
    public var h264Profiles: [String]
    /// Why the node is unusable (cannot be opened, no driver, driver failed); nil when it works.
    public var error: String?

    /// Usable for FrameTap: the driver initialised and decodes at least one H.264 profile.
    public var usable: Bool { error == nil && !h264Profiles.isEmpty }

    public init(path: String, vendor: String? = nil, vaapiVersion: String? = nil, h264Profiles: [String] = [], error: String? = nil) {
        self.path = path
        self.vendor = vendor
        self.vaapiVersion = vaapiVersion
        self.h264Profiles = h264Profiles
        self.error = error
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(path, forKey: .path)
        try container.encode(vendor, forKey: .vendor)  // explicit nulls: one stable shape
        try container.encode(vaapiVersion, forKey: .vaapiVersion)
        try container.encode(h264Profiles, forKey: .h264Profiles)
        try container.encode(usable, forKey: .usable)
        try container.encode(error, forKey: .error)
    }

    private enum CodingKeys: String, CodingKey { case path, vendor, vaapiVersion, h264Profiles, usable, error }
}

/// The hardware decoding this process can use: libavcodec's VA-API support and every render node.
public struct HardwareReport: Sendable, Equatable, Encodable {
    /// The libavcodec the process runs with (`avcodec_version()`), e.g. "59.37.100".
    public var libavcodecVersion: String
    /// Whether this libavcodec build has the VA-API H.264 hwaccel at all.
    public var libavcodecVAAPI: Bool
    /// The VA-API version of the libva headers this binary was built with (libva 2.17 is VA-API 1.17).
    public var vaapiHeaderVersion: String
    public var renderNodes: [RenderNodeReport]
}

/// Asks libva directly what each DRM render node can do, so `frametap serve` can say at start-up
/// (and at `GET /system`) whether pictures will be decoded in hardware and why not.
///
/// The decoder itself opens devices through libavutil (`VAAPIDevice`); this probe only reads
/// facts: open the node, `vaGetDisplayDRM`, `vaInitialize`, `vaQueryVendorString`,
/// `vaQueryConfigProfiles` and, per H.264 profile, `vaQueryConfigEntrypoints` for VLD.
/// libva's own messages ("libva info: ...") are kept off stderr; its errors end up in the
/// node's `error`.
public enum HardwareProbe {
    /// Probes every `renderD*` node in `directory` (none there, or no such folder: no nodes).
    public static func probe(directory: String = "/dev/dri") -> HardwareReport {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let nodes = names.filter { $0.hasPrefix("renderD") }.sorted().map { "\(directory)/\($0)" }
        return probe(renderNodes: nodes)
    }

    /// Probes the given nodes, in order.
    public static func probe(renderNodes: [String]) -> HardwareReport {
        let vaapi = avcodec_find_decoder(AV_CODEC_ID_H264).map { VAAPIDevice.decoderSupportsVAAPI($0) } ?? false
        let avcodec = avcodec_version()
        return HardwareReport(
            libavcodecVersion: "\(avcodec >> 16).\((avcodec >> 8) & 0xFF).\(avcodec & 0xFF)", libavcodecVAAPI: vaapi, vaapiHeaderVersion: "\(VA_MAJOR_VERSION).\(VA_MINOR_VERSION).\(VA_MICRO_VERSION)",
            renderNodes: renderNodes.map(probeNode))
    }

    /// One node; never throws: every failure is the report's `error`.
    public static func probeNode(_ path: String) -> RenderNodeReport {
        var report = RenderNodeReport(path: path)
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            let hint = errno == EACCES ? " (add the node's group: --group-add \"$(stat -c %g \(path))\")" : ""
            report.error = "cannot open: \(reason)\(hint)"
            return report
        }
        defer { close(fd) }
        var info = stat()
        if fstat(fd, &info) == 0, info.st_mode & S_IFMT != S_IFCHR {
            report.error = "not a character device"
            return report
        }
        guard let display = vaGetDisplayDRM(fd) else {
            report.error = "vaGetDisplayDRM: libva does not take it as a DRM device"
            return report
        }
        let messages = MessageSink()
        let context = Unmanaged.passRetained(messages)
        defer { context.release() }
        vaSetErrorCallback(display, { context, message in
            guard let context, let message else { return }
            Unmanaged<MessageSink>.fromOpaque(context).takeUnretainedValue().append(String(cString: message))
        }, context.toOpaque())
        vaSetInfoCallback(display, nil, nil)

        var major: Int32 = 0
        var minor: Int32 = 0
        let status = vaInitialize(display, &major, &minor)
        defer { vaTerminate(display) }
        guard status == VA_STATUS_SUCCESS else {
            let detail = messages.text.map { " (\($0))" } ?? ""
            report.error = "vaInitialize: \(String(cString: vaErrorStr(status)))\(detail)"
            return report
        }
        report.vaapiVersion = "\(major).\(minor)"
        report.vendor = vaQueryVendorString(display).map { String(cString: $0) }

        var profiles = [VAProfile](repeating: VAProfileNone, count: Int(max(vaMaxNumProfiles(display), 1)))
        var profileCount: Int32 = 0
        let listed = vaQueryConfigProfiles(display, &profiles, &profileCount)
        guard listed == VA_STATUS_SUCCESS else {
            report.error = "vaQueryConfigProfiles: \(String(cString: vaErrorStr(listed)))"
            return report
        }
        var entrypoints = [VAEntrypoint](repeating: VAEntrypoint(0), count: Int(max(vaMaxNumEntrypoints(display), 1)))
        for profile in profiles.prefix(Int(profileCount)) {
            guard let name = h264ProfileName(profile) else { continue }
            var count: Int32 = 0
            guard vaQueryConfigEntrypoints(display, profile, &entrypoints, &count) == VA_STATUS_SUCCESS else { continue }
            if entrypoints.prefix(Int(count)).contains(VAEntrypointVLD) {
                report.h264Profiles.append(name)
            }
        }
        return report
    }

    /// The H.264 profiles libva knows (nil for other codecs).
    static func h264ProfileName(_ profile: VAProfile) -> String? {
        switch profile {
        case VAProfileH264ConstrainedBaseline: "ConstrainedBaseline"
        case VAProfileH264Main: "Main"
        case VAProfileH264High: "High"
        case VAProfileH264MultiviewHigh: "MultiviewHigh"
        case VAProfileH264StereoHigh: "StereoHigh"
        case VAProfile(rawValue: 5): "Baseline"  // VAProfileH264Baseline, deprecated in libva
        case VAProfile(rawValue: 36): "High10"  // VAProfileH264High10 (libva 2.19+)
        default: nil
        }
    }

    /// Collects libva's error messages for one probe (called on the probing thread only).
    private final class MessageSink: @unchecked Sendable {
        private var lines: [String] = []
        func append(_ line: String) { lines.append(line.trimmingCharacters(in: .whitespacesAndNewlines)) }
        var text: String? { lines.isEmpty ? nil : lines.joined(separator: "; ") }
    }
}
