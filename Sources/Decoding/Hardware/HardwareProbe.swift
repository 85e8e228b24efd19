import Synchronization
import CFFmpeg
import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif

/// What one DRM render node offers for H.264 and H.265 decoding, as libva reports it.
public struct RenderNodeReport: Sendable, Equatable {
    public var path: String
    /// `vaQueryVendorString`: the driver's own description, e.g.
    /// "Intel iHD driver for Intel(R) Gen Graphics - 23.1.1 ()" or "Mesa Gallium driver ... for AMD ...".
    public var vendor: String?
    /// The VA-API version the driver implements (`vaInitialize`'s major.minor).
    public var vaapiVersion: String?
    /// H.264 profiles with a decode (VLD) entry point, e.g. ["ConstrainedBaseline", "Main", "High"].
    public var h264Profiles: [String]
    /// H.265 profiles with a decode (VLD) entry point, e.g. ["Main", "Main10"] (libva's names
    /// without the VAProfileHEVC prefix: "Main422_10", "Main444_12", "SccMain", ...).
    public var hevcProfiles: [String]
    /// Why the node is unusable (cannot be opened, no driver, driver failed); nil when it works.
    public var error: String?

    /// Usable for FrameTap: the driver initialised and decodes a profile of a codec FrameTap
    /// sends to VA-API (see `capabilities`).
    public var usable: Bool { error == nil && !capabilities.isEmpty }

    /// What FrameTap decodes on this node, by the profiles it lists: H.264 when it lists any
    /// H.264 profile; H.265 4:2:0 when it lists Main (8-bit) or Main10 (and 10-bit). libavcodec's
    /// VA-API HEVC path is taken for Main and Main 10 only: the range-extension profiles a node
    /// may list (4:2:2, 4:4:4, 12-bit) are reported in `hevcProfiles` but decoded in software.
    public var capabilities: [HardwareCapability] {
        guard error == nil else { return [] }
        var capabilities: [HardwareCapability] = []
        if !h264Profiles.isEmpty { capabilities.append(.vaapiH264) }
        if let hevc = HardwareCapability.vaapiHEVC(profiles: hevcProfiles) { capabilities.append(hevc) }
        return capabilities
    }

    public init(
        path: String, vendor: String? = nil, vaapiVersion: String? = nil, h264Profiles: [String] = [],
        hevcProfiles: [String] = [], error: String? = nil
    ) {
        self.path = path
        self.vendor = vendor
        self.vaapiVersion = vaapiVersion
        self.h264Profiles = h264Profiles
        self.hevcProfiles = hevcProfiles
        self.error = error
    }
}

/// One NVIDIA GPU as the CUDA driver describes it.
public struct CUDADeviceReport: Sendable, Equatable {
    /// `cuda:N`, as `--hw-devices` names it.
    public var device: HardwareDeviceID
    public var index: Int
    /// e.g. "NVIDIA H100 80GB HBM3".
    public var name: String?
    public var totalMemoryBytes: Int?
    /// Whether a libavutil device context opened on it; nil when not tried (the plain probe
    /// only asks the driver; `HardwareProbe.probe(openingWith:)` opens through a pool).
    public var opened: Bool?
    /// Why the device is unusable (the driver does not describe it, or it did not open).
    public var error: String?

    /// The driver describes it, and it opened when that was tried.
    public var usable: Bool { error == nil && opened != false }

    /// What NVDEC decodes on it (NVIDIA's application note for the GPUs measured; a stream the
    /// device itself turns down still falls back), for the codecs this libavcodec has the NVDEC
    /// hwaccel of; none when the device is unusable.
    public var capabilities: [HardwareCapability] {
        usable ? [.nvdecH264, .nvdecHEVC].filter { LibavHardwareSupport.decodes(.cuda, codec: $0.codec) } : []
    }

    public init(
        device: HardwareDeviceID, index: Int, name: String? = nil, totalMemoryBytes: Int? = nil, opened: Bool? = nil,
        error: String? = nil
    ) {
        self.device = device
        self.index = index
        self.name = name
        self.totalMemoryBytes = totalMemoryBytes
        self.opened = opened
        self.error = error
    }
}

/// The hardware decoding this process can use: libavcodec's VA-API support and every render
/// node, and the CUDA devices (`cuda`). GET /system shows it as its `hardware` object.
public struct HardwareReport: Sendable, Equatable {
    /// The libavcodec the process runs with (`avcodec_version()`), e.g. "59.37.100".
    public var libavcodecVersion: String
    /// Whether this libavcodec build has a VA-API hwaccel (H.264 or H.265) at all.
    public var libavcodecVAAPI: Bool
    /// The VA-API version of the libva headers this binary was built with (libva 2.17 is VA-API 1.17).
    public var vaapiHeaderVersion: String
    public var renderNodes: [RenderNodeReport]
    /// NVIDIA GPUs as the CUDA driver describes them, and libavcodec's NVDEC support.
    public var cuda: CUDAReport

    public var cudaDevices: [CUDADeviceReport] { cuda.devices }

    public init(
        libavcodecVersion: String, libavcodecVAAPI: Bool, vaapiHeaderVersion: String, renderNodes: [RenderNodeReport],
        cuda: CUDAReport = CUDAReport(driverVersion: nil, error: nil, devices: [])
    ) {
        self.libavcodecVersion = libavcodecVersion
        self.libavcodecVAAPI = libavcodecVAAPI
        self.vaapiHeaderVersion = vaapiHeaderVersion
        self.renderNodes = renderNodes
        self.cuda = cuda
    }
}

/// What the CUDA driver says: its version and every device, or why there are none.
public struct CUDAReport: Sendable, Equatable {
    /// Whether this libavcodec build has an NVDEC (CUDA) hwaccel (H.264 or H.265) at all (by
    /// default: this process's libavcodec).
    public var libavcodecNVDEC: Bool
    /// The CUDA driver's version, e.g. "12.8"; nil without a driver.
    public var driverVersion: String?
    /// Why no CUDA device can be listed (no libcuda.so.1, cuInit failed...); nil when the driver answered.
    public var error: String?
    public var devices: [CUDADeviceReport]

    public init(
        driverVersion: String?, error: String?, devices: [CUDADeviceReport],
        libavcodecNVDEC: Bool? = nil
    ) {
        self.libavcodecNVDEC = libavcodecNVDEC ?? LibavHardwareSupport.decodes(.cuda)
        self.driverVersion = driverVersion
        self.error = error
        self.devices = devices
    }
}

/// Asks libva directly what each DRM render node can do, so `frametap serve` can say at start-up
/// (and at `GET /system`) whether pictures will be decoded in hardware and why not.
///
/// The decoder itself opens devices through libavutil (`VAAPIDevice`); this probe only reads
/// facts: open the node, `vaGetDisplayDRM`, `vaInitialize`, `vaQueryVendorString`,
/// `vaQueryConfigProfiles` and, per H.264 and H.265 profile, `vaQueryConfigEntrypoints` for VLD.
/// libva's own messages ("libva info: ...") are kept off stderr; its errors end up in the
/// node's `error`.
public enum HardwareProbe {
    /// Probes every `renderD*` node in `directory` (none there, or no such folder: no nodes)
    /// and every CUDA device the driver reports. With a `pool`, each CUDA device is also opened
    /// through it (and stays open there, warm for the first session); without, only the driver
    /// is asked, which costs no GPU memory.
    public static func probe(directory: String = "/dev/dri") -> HardwareReport {
        probe(renderNodes: VAAPIDevice.scanRenderNodes(directory: directory))
    }

    public static func probe(directory: String = "/dev/dri", openingWith pool: HardwareDevicePool) -> HardwareReport {
        probe(renderNodes: VAAPIDevice.scanRenderNodes(directory: directory), cuda: probeCUDA(), openingWith: pool)
    }

    /// Probes the given nodes, in order, and the CUDA devices the driver reports.
    public static func probe(renderNodes: [String]) -> HardwareReport {
        probe(renderNodes: renderNodes, cuda: probeCUDA(), openingWith: nil)
    }

    /// Probes the given nodes, in order, and `cuda`'s devices (opened through `pool` if given).
    public static func probe(
        renderNodes: [String], cuda: CUDAReport, openingWith pool: HardwareDevicePool? = nil
    ) -> HardwareReport {
        let avcodec = avcodec_version()
        var cuda = cuda
        if let pool { cuda.devices = cuda.devices.map { openDevice($0, in: pool) } }
        return HardwareReport(
            libavcodecVersion: "\(avcodec >> 16).\((avcodec >> 8) & 0xFF).\(avcodec & 0xFF)",
            libavcodecVAAPI: LibavHardwareSupport.decodes(.vaapi),
            vaapiHeaderVersion: "\(VA_MAJOR_VERSION).\(VA_MINOR_VERSION).\(VA_MICRO_VERSION)",
            renderNodes: renderNodes.map(probeNode), cuda: cuda)
    }

    /// The CUDA devices of the driver in `library` (`dlopen`; the process's own driver by
    /// default). A missing library or a failing `cuInit` gives no devices and the reason.
    public static func probeCUDA(library: String? = nil) -> CUDAReport {
        let loaded = library.map { CUDADriver.load(library: $0) } ?? CUDADriver.shared
        let driver: CUDADriver
        switch loaded {
        case .failure(let error): return CUDAReport(driverVersion: nil, error: error.message, devices: [])
        case .success(let found): driver = found
        }
        let count: Int
        switch driver.deviceCount() {
        case .failure(let error): return CUDAReport(driverVersion: driver.version, error: error.message, devices: [])
        case .success(let found): count = found
        }
        let devices = (0..<count).map { index in
            var report = CUDADeviceReport(device: .cuda(index), index: index)
            switch driver.facts(ordinal: index) {
            case .success(let facts):
                report.name = facts.name
                report.totalMemoryBytes = facts.totalMemoryBytes
            case .failure(let error):
                report.error = error.message
            }
            return report
        }
        return CUDAReport(driverVersion: driver.version, error: nil, devices: devices)
    }

    private static func openDevice(_ device: CUDADeviceReport, in pool: HardwareDevicePool) -> CUDADeviceReport {
        guard device.error == nil else { return device }
        var report = device
        switch pool.lease(among: [device.device]) {
        case .success:
            report.opened = true  // the lease ends here; the pool keeps the context open
        case .failure(let error):
            report.opened = false
            report.error = error.message
        }
        return report
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
            let h264 = h264ProfileName(profile)
            let hevc = hevcProfileName(profile)
            guard h264 != nil || hevc != nil else { continue }
            var count: Int32 = 0
            guard vaQueryConfigEntrypoints(display, profile, &entrypoints, &count) == VA_STATUS_SUCCESS else { continue }
            guard entrypoints.prefix(Int(count)).contains(VAEntrypointVLD) else { continue }
            if let h264 { report.h264Profiles.append(h264) }
            if let hevc { report.hevcProfiles.append(hevc) }
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

    /// The H.265 profiles libva knows, by their names without the VAProfileHEVC prefix (nil for
    /// other codecs).
    static func hevcProfileName(_ profile: VAProfile) -> String? {
        switch profile {
        case VAProfileHEVCMain: "Main"
        case VAProfileHEVCMain10: "Main10"
        case VAProfileHEVCMain12: "Main12"
        case VAProfileHEVCMain422_10: "Main422_10"
        case VAProfileHEVCMain422_12: "Main422_12"
        case VAProfileHEVCMain444: "Main444"
        case VAProfileHEVCMain444_10: "Main444_10"
        case VAProfileHEVCMain444_12: "Main444_12"
        case VAProfileHEVCSccMain: "SccMain"
        case VAProfileHEVCSccMain10: "SccMain10"
        case VAProfileHEVCSccMain444: "SccMain444"
        case VAProfileHEVCSccMain444_10: "SccMain444_10"
        default: nil
        }
    }

    /// Collects libva's error messages for one probe (called on the probing thread only).
    private final class MessageSink: Sendable {
        private let lines = Mutex<[String]>([])
        func append(_ line: String) { lines.withLock { $0.append(line.trimmingWhitespace()) } }
        var text: String? { lines.withLock { $0.isEmpty ? nil : $0.joined(separator: "; ") } }
    }
}
