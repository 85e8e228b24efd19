import ArgumentParser
import Bitstream
import Decoding
import Dispatch
import FoundationEssentials
import FrameTapAPI
import Timekeeping
import VideoCoding

/// `frametap probe`: what a stream contains, without decoding it — its codec, NAL units, the format
/// description of every parameter set, access units and keyframes. The codec is stated with
/// `--codec` or detected from the first parameter set; what is codec-specific comes from the
/// bitstream layer's front (`StreamProbe`), and this command only lays it out.
struct ProbeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "probe",
        abstract: "Name the codec; list NAL units, parameter-set format descriptions, access units and keyframes.",
        discussion: """
            With --hardware (and no input) it reports the decoding hardware instead, as JSON: \
            libavcodec's VA-API and NVDEC support, every render node (driver, VA-API version, H.264 \
            profiles), every CUDA device (name, memory, driver version), and for each device of \
            --hw-devices (default: all of them) whether a decoding context opens and how long it took.
            """
    )

    @Argument(help: "An H.264 or H.265 Annex B elementary stream, or - for standard input.")
    var input: String?

    @Option(help: "h264 or h265: the stream's codec (default: detected from its first parameter set).")
    var codec: VideoCodec?

    @Flag(help: "Print one JSON document instead of text.")
    var json = false

    @Option(name: .customLong("max-nal-bytes"), help: "Largest NAL unit accepted, in bytes.")
    var maxNALBytes = AnnexBSplitter.defaultMaxNALBytes

    @Flag(help: "Report the decoding hardware (JSON) instead of probing a stream.")
    var hardware = false

    @Option(name: .customLong("hw-devices"), help: "With --hardware: the devices to open, as decode takes them.")
    var hwDevices: String?

    func validate() throws {
        guard maxNALBytes >= 1024 else { throw ValidationError("--max-nal-bytes must be at least 1024") }
        if hardware {
            guard input == nil else { throw ValidationError("--hardware takes no input stream") }
            guard codec == nil else { throw ValidationError("--codec goes with an input stream, not --hardware") }
            do {
                _ = try hwDevices.map { text throws(DecodeError) in try HardwareDeviceList(parsing: text) }
            } catch {
                throw ValidationError("--hw-devices: \(error.message)")
            }
        } else {
            guard input != nil else { throw ValidationError("missing the input stream (or --hardware)") }
            guard hwDevices == nil else { throw ValidationError("--hw-devices goes with --hardware") }
        }
    }

    func run() throws {
        guard let input else {
            try printHardware()
            return
        }
        let description: StreamDescription
        do {
            description = try Self.describe(path: input, codec: codec, maxNALBytes: maxNALBytes)
        } catch {
            printError("frametap: error: \(error.message)")
            throw error.exitCode
        }
        guard description.codec != nil else {
            let why =
                description.unitsOfUnknownCodec == 0
                ? "no start code in \(description.bytes) bytes"
                : "\(description.unitsOfUnknownCodec) NAL units and no parameter set of either codec "
                    + "(--codec h264 or h265 reads them anyway)"
            printError("frametap: error: \(input) is neither an H.264 nor an H.265 Annex B stream: \(why)")
            throw ExitStatus.notVideo
        }
        guard !description.nalUnits.isEmpty else {
            printError("frametap: error: \(input) is not an Annex B stream: no start code in \(description.bytes) bytes")
            throw ExitStatus.notVideo
        }
        let stated = codec != nil
        let output =
            json ? try ProbeJSON(description, codecStated: stated).text() : ProbeText(description, codecStated: stated).text()
        print(output, terminator: output.hasSuffix("\n") ? "" : "\n")
        // As `decode` ends for the same bytes: read as the stated codec, nothing in them decodes.
        if let stated = codec, description.keyframes.isEmpty,
            description.problems.contains(where: { $0.code == "codec_mismatch" })
        {
            let failure = CommandFailure.otherCodec(than: stated, input: input)
            printError("frametap: error: \(failure.message)")
            throw failure.exitCode
        }
    }
}

extension ProbeCommand {
    static func describe(path: String, codec: VideoCodec?, maxNALBytes: Int) throws(CommandFailure) -> StreamDescription {
        var probe = StreamProbe(codec: codec, maxNALBytes: maxNALBytes)
        var reader = try InputReader(path: path)
        do {
            try reader.forEachChunk { probe.push($0) }
        } catch let error as CommandFailure {
            throw error
        } catch {
            throw CommandFailure.io("cannot read \(path): \(error)")
        }
        return probe.finish()
    }

    /// One device as `--hardware` opened it.
    struct DeviceOpen: Encodable {
        let device: HardwareDeviceID
        let opened: Bool
        let seconds: Double
        let error: String?

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(device.description, forKey: .device)
            try container.encode(opened, forKey: .opened)
            try container.encode(seconds, forKey: .seconds)
            try container.encode(error, forKey: .error)  // explicit null: one stable shape
        }

        private enum CodingKeys: String, CodingKey { case device, opened, seconds, error }
    }

    /// The hardware as GET /system shows it, the opens tried here, and the pool's view of them.
    struct HardwareOutput: Encodable {
        let hardware: HardwareReportJSON
        let cuda: CUDAReportJSON
        let opens: [DeviceOpen]
        let devices: [HardwareDeviceUsageJSON]
    }

    /// Opens each device once through a pool of its own, as the first decoder on it would.
    private func printHardware() throws {
        LibavLogging.set(.quiet)
        let list = try hwDevices.map { text throws(DecodeError) in try HardwareDeviceList(parsing: text) }
        let pool = HardwareDevicePool(clock: SystemClock())
        var opens: [DeviceOpen] = []
        for kind in HardwareDeviceKind.allCases {
            guard case .success(let devices) = pool.devices(kind, in: list) else { continue }
            for device in devices {
                let start = SystemClock().uptime
                let result = pool.lease(among: [device])
                let seconds = Double(SystemClock().uptime - start) / 1e9
                switch result {
                case .success: opens.append(DeviceOpen(device: device, opened: true, seconds: seconds, error: nil))
                case .failure(let error):
                    opens.append(DeviceOpen(device: device, opened: false, seconds: seconds, error: error.message))
                }
            }
        }
        let report = HardwareProbe.probe()
        let output = HardwareOutput(
            hardware: HardwareReportJSON(report), cuda: CUDAReportJSON(report.cuda), opens: opens,
            devices: pool.usage().map(HardwareDeviceUsageJSON.init))
        print(String(decoding: try WireJSON.encoder(indented: true).encode(output), as: UTF8.self))
    }
}

