import Decoding
import FoundationEssentials
import HTTPServer
import Imaging
import SessionCatalog
import Sessions
import Timekeeping

/// `GET /system`: what this instance is and can do: version, decoder defaults, limits, and the
/// hardware decoding it found at start-up (render nodes with driver, VA-API version and H.264 and
/// H.265 profiles, CUDA devices, the codecs each decodes, or the reason a device is unusable).
public struct SystemInfo: Sendable {
    /// The service version (also openapi.yaml's info.version).
    public static let version = "0.1.0"

    /// Probed once per process, on first use, unless the service was given its own report
    /// (`frametap serve` probes at start-up, opening the devices it will use): libva loads a
    /// driver per node and CUDA makes a context per device, which takes a moment and does not
    /// change while running.
    public static let hardware: HardwareReport = HardwareProbe.probe()

    public var version: String
    public var libavcodec: String
    public var backendDefault: String
    public var decoderThreads: Int
    /// The picture encoder the server chose at start-up and why (`--encoder`).
    public var encoder: PictureEncoderIdentity
    /// True when libavcodec has VA-API and at least one render node decodes H.264 or H.265.
    public var vaapiAvailable: Bool
    /// True when libavcodec has NVDEC and the CUDA driver lists at least one usable device.
    public var cudaAvailable: Bool
    public var hardware: HardwareReport
    /// Every hardware device sessions may use: open or not, and the sessions decoding on it.
    public var devices: [HardwareDeviceUsage]
    /// Where `auto` places sessions: the CPU and each device, with capacity and load.
    public var engines: [EnginePlacement.Report]
    public var limits: Limits
    public var activeSessions: Int
    /// `--max-decoder-memory` and what the sessions' decoders hold of it now.
    public var decoderMemory: DecoderMemoryUsage
    /// `--max-history-memory` and what the sessions' histories keep of it now.
    public var historyMemory: HistoryMemoryUsage
    /// The configuration file and how its last reading went, and `--state-dir`.
    public var configurationFile = ConfigurationFile()

    public struct ConfigurationFile: Sendable {
        public var status: ConfigurationStatus.Snapshot?
        public var stateDirectory: String?
        public var declaredSessions = 0
        public var persistedSessions = 0

        public init(
            _ status: ConfigurationStatus.Snapshot? = nil, stateDirectory: String? = nil, declaredSessions: Int = 0,
            persistedSessions: Int = 0
        ) {
            self.status = status
            self.stateDirectory = stateDirectory
            self.declaredSessions = declaredSessions
            self.persistedSessions = persistedSessions
        }
    }

    public struct DecoderMemoryUsage: Sendable {
        public var limitBytes: Int
        public var usedBytes: Int
        public var decoders: Int
        /// Streams refused for want of memory since start-up.
        public var refusals: Int
    }

    public struct HistoryMemoryUsage: Sendable {
        public var limitBytes: Int
        public var usage: HistoryMemoryBudget.Usage
    }

    public struct Limits: Sendable {
        public var maxSessions: Int
        /// `--max-sessions-per-token`; nil: unlimited.
        public var maxSessionsPerToken: Int?
        /// Nil: unlimited.
        public var maxBodyBytes: Int?
        public var maxSpoolBytes: Int
        /// What every upload answered as multipart/mixed may spool together.
        public var maxSpoolTotalBytes: Int
        public var maxNALBytes: Int
        public var maxPictureWidth: Int
        public var maxPictureHeight: Int
        public var maxPicturePixels: Int
        public var sessionIdleTimeoutSeconds: Double
        public var maxWaitMilliseconds: Int
        /// Each session's compressed history: `--history-seconds` and `--history-bytes`.
        public var historySeconds: Double
        public var historyBytes: Int
        /// `--max-catchup-decoders` and `--max-catchup-queue`.
        public var maxCatchupDecoders: Int
        public var maxCatchupQueue: Int
    }

    /// `limits`: the limits a reload may have changed since start (default: the configuration's).
    public init(
        configuration: ServerConfiguration, services: SessionServices, limits live: RuntimeLimits.Values? = nil,
        activeSessions: Int, hardware: HardwareReport = SystemInfo.hardware
    ) {
        let live = live ?? RuntimeLimits(configuration).current
        cudaAvailable = hardware.cuda.libavcodecNVDEC && hardware.cuda.devices.contains { $0.usable }
        devices = services.devicePool.usage()
        engines = services.devicePool.engines.report()
        version = Self.version
        libavcodec = hardware.libavcodecVersion
        backendDefault = configuration.backend.rawValue
        decoderThreads = configuration.decoderThreads
        encoder = services.encoderFactory.identity
        vaapiAvailable = hardware.libavcodecVAAPI && hardware.renderNodes.contains { $0.usable }
        self.hardware = hardware
        limits = Limits(
            maxSessions: live.maxSessions, maxSessionsPerToken: configuration.maxSessionsPerToken,
            maxBodyBytes: configuration.maxBodyBytes,
            maxSpoolBytes: configuration.maxSpoolBytes, maxSpoolTotalBytes: services.spoolBudget.limit,
            maxNALBytes: configuration.maxNALBytes, maxPictureWidth: configuration.pictureSizeLimit.maxWidth,
            maxPictureHeight: configuration.pictureSizeLimit.maxHeight,
            maxPicturePixels: configuration.pictureSizeLimit.maxPixels,
            sessionIdleTimeoutSeconds: Double(live.idleTimeout.nanoseconds) / 1e9,
            maxWaitMilliseconds: FrameTapAPI.maxWaitMilliseconds,
            historySeconds: Double(configuration.historySeconds.nanoseconds) / 1e9, historyBytes: configuration.historyBytes,
            maxCatchupDecoders: configuration.catchUpDecoders, maxCatchupQueue: services.catchUpPool.queueLimit)
        self.activeSessions = activeSessions
        let memory = services.decoderMemory.usage
        decoderMemory = DecoderMemoryUsage(
            limitBytes: services.decoderMemory.limit, usedBytes: memory.bytes, decoders: memory.decoders,
            refusals: memory.refusals)
        historyMemory = HistoryMemoryUsage(limitBytes: services.historyMemory.limit, usage: services.historyMemory.usage)
    }

    /// Gauges for `/metrics`, set once: `frametap_vaapi_render_nodes` (nodes found),
    /// `frametap_vaapi_render_node_usable{node}` (1 when the node decodes H.264 or H.265),
    /// `frametap_vaapi_h264_profiles{node,profile}` and `frametap_vaapi_hevc_profiles{node,profile}`
    /// (1 per profile with a decode entry point), and `frametap_hardware_codec{device,codec}` (1
    /// per codec a usable device decodes).
    static func registerHardwareMetrics(_ metrics: FrameTapMetrics, hardware: HardwareReport = SystemInfo.hardware) {
        func gauge(_ name: String, _ help: String, _ labels: [(String, String)], _ value: Double) {
            metrics.registry.makeGauge(
                descriptor: .init(metricName: name, unitName: "", helpText: help), labels: labels
            ).set(to: value)
        }
        gauge("frametap_vaapi_render_nodes", "DRM render nodes found at start-up", [], Double(hardware.renderNodes.count))
        gauge("frametap_cuda_devices", "CUDA devices the driver listed at start-up", [], Double(hardware.cuda.devices.count))
        let codecHelp = "1 per codec a usable hardware device decodes for FrameTap"
        for device in hardware.cuda.devices {
            gauge(
                "frametap_cuda_device_usable", "1 when the CUDA device is described by the driver (and opened, when tried)",
                [("device", device.device.description)], device.usable ? 1 : 0)
            for capability in device.capabilities {
                gauge(
                    "frametap_hardware_codec", codecHelp,
                    [("device", device.device.description), ("codec", capability.codec.rawValue)], 1)
            }
        }
        for node in hardware.renderNodes {
            gauge(
                "frametap_vaapi_render_node_usable", "1 when libva initialised the node and it decodes H.264 or H.265",
                [("node", node.path)], node.usable ? 1 : 0)
            for profile in node.h264Profiles {
                gauge(
                    "frametap_vaapi_h264_profiles", "H.264 profiles the node decodes (VLD entry point)",
                    [("node", node.path), ("profile", profile)], 1)
            }
            for profile in node.hevcProfiles {
                gauge(
                    "frametap_vaapi_hevc_profiles", "H.265 profiles the node decodes (VLD entry point)",
                    [("node", node.path), ("profile", profile)], 1)
            }
            for capability in node.capabilities {
                gauge("frametap_hardware_codec", codecHelp, [("device", node.path), ("codec", capability.codec.rawValue)], 1)
            }
        }
    }
}
