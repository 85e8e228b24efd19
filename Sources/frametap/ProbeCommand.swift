import ArgumentParser
import Decoding
import Dispatch
import FoundationEssentials
import FrameTapAPI
import H264
import Timekeeping
import VideoCoding

/// `frametap probe`: what a stream contains, without decoding it — NAL units, the format
/// description of every parameter set, access units and keyframes.
struct ProbeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "probe",
        abstract: "List NAL units, parameter-set format descriptions, access units and keyframes.",
        discussion: """
            With --hardware (and no input) it reports the decoding hardware instead, as JSON: \
            libavcodec's VA-API and NVDEC support, every render node (driver, VA-API version, H.264 \
            profiles), every CUDA device (name, memory, driver version), and for each device of \
            --hw-devices (default: all of them) whether a decoding context opens and how long it took.
            """
    )

    @Argument(help: "An H.264 Annex B elementary stream, or - for standard input.")
    var input: String?

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
        let report: ProbeReport
        do {
            report = try ProbeReport.scan(path: input, maxNALBytes: maxNALBytes)
        } catch {
            printError("frametap: error: \(error.message)")
            throw ExitStatus.inputOutput
        }
        guard !report.nalUnits.isEmpty else {
            printError("frametap: error: \(input) is not an H.264 Annex B stream: no start code in \(report.bytes) bytes")
            throw ExitStatus.notH264
        }
        let output = json ? try report.json() : report.text()
        print(output, terminator: output.hasSuffix("\n") ? "" : "\n")
    }
}

extension ProbeCommand {
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
        let pool = HardwareDevicePool()
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

struct ProbeReport: Encodable {
    struct NALRecord: Encodable {
        let offset: Int
        let size: Int
        let type: Int
        let name: String
        let refIdc: Int
    }

    struct SPSRecord: Encodable {
        let id: Int
        let offset: Int
        /// Later units with the same id and identical bytes (streams often repeat parameter sets).
        var repeats = 0
        let format: StreamFormat
        let maxNumRefFrames: Int
        let frameMbsOnly: Bool
        let mbAdaptiveFrameField: Bool
        let maxNumReorderFrames: Int?

        /// The format as the API shows it; `maxNumReorderFrames` is left out when not signalled.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(offset, forKey: .offset)
            try container.encode(repeats, forKey: .repeats)
            try container.encode(StreamFormatJSON(format), forKey: .format)
            try container.encode(maxNumRefFrames, forKey: .maxNumRefFrames)
            try container.encode(frameMbsOnly, forKey: .frameMbsOnly)
            try container.encode(mbAdaptiveFrameField, forKey: .mbAdaptiveFrameField)
            try container.encodeIfPresent(maxNumReorderFrames, forKey: .maxNumReorderFrames)
        }

        private enum CodingKeys: String, CodingKey {
            case id, offset, repeats, format, maxNumRefFrames, frameMbsOnly, mbAdaptiveFrameField, maxNumReorderFrames
        }
    }

    struct PPSRecord: Encodable {
        let id: Int
        let spsId: Int
        let offset: Int
        var repeats = 0
        let entropyCoding: String
        let sliceGroups: Int
    }

    struct KeyframeRecord: Encodable {
        let accessUnit: Int
        let offset: Int
        let kind: String
    }

    struct Problem: Encodable {
        let offset: Int?
        let code: String
        let message: String
    }

    var bytes = 0
    var nalUnits: [NALRecord] = []
    var sequenceParameterSets: [SPSRecord] = []
    var pictureParameterSets: [PPSRecord] = []
    var accessUnits = 0
    var pictures = 0
    var keyframes: [KeyframeRecord] = []
    var problems: [Problem] = []
    /// The bytes of the newest SPS/PPS per id, to fold identical repeats into one record.
    private var lastSPSBytes: [Int: (bytes: [UInt8], record: Int)] = [:]
    private var lastPPSBytes: [Int: (bytes: [UInt8], record: Int)] = [:]

    private enum CodingKeys: String, CodingKey {
        case bytes, nalUnits, sequenceParameterSets, pictureParameterSets, accessUnits, pictures, keyframes, problems
    }

    static func scan(path: String, maxNALBytes: Int) throws(CommandFailure) -> ProbeReport {
        var report = ProbeReport()
        var splitter = AnnexBSplitter(maxNALBytes: maxNALBytes)
        var assembler = AccessUnitAssembler()
        var reader = try InputReader(path: path)

        func take(_ event: SplitterEvent) {
            switch event {
            case .unit(let unit):
                let nal = NALUnit(unit)
                report.record(nal)
                assembler.push(nal) { report.record($0) }
            case .dropped(let error, let prefix):
                report.problems.append(Problem(offset: nil, code: error.code.rawValue, message: error.message))
                assembler.unitDropped(prefix: prefix) { report.record($0) }
            }
        }
        do {
            try reader.forEachChunk { chunk in
                report.bytes += chunk.count
                splitter.push(chunk, take)
            }
        } catch let error as CommandFailure {
            throw error
        } catch {
            throw CommandFailure.io("cannot read \(path): \(error)")
        }
        splitter.finish(take)
        assembler.finish { report.record($0) }
        return report
    }

    private mutating func record(_ nal: NALUnit) {
        nalUnits.append(
            NALRecord(
                offset: nal.streamOffset, size: nal.bytes.count, type: Int(nal.type.rawValue), name: nal.type.name,
                refIdc: Int(nal.refIdc)))
        do {
            switch nal.type {
            case .sps:
                let sps = try SequenceParameterSet(nal: nal)
                if let record = Self.repeatedRecord(nal, id: sps.id, next: sequenceParameterSets.count, &lastSPSBytes) {
                    sequenceParameterSets[record].repeats += 1
                    return
                }
                sequenceParameterSets.append(
                    SPSRecord(
                        id: sps.id, offset: nal.streamOffset, format: StreamFormat(sps: sps),
                        maxNumRefFrames: sps.maxNumRefFrames, frameMbsOnly: sps.frameMbsOnly,
                        mbAdaptiveFrameField: sps.mbAdaptiveFrameField,
                        maxNumReorderFrames: sps.vui?.maxNumReorderFrames))
            case .pps:
                let pps = try PictureParameterSet(nal: nal)
                if let record = Self.repeatedRecord(nal, id: pps.id, next: pictureParameterSets.count, &lastPPSBytes) {
                    pictureParameterSets[record].repeats += 1
                    return
                }
                pictureParameterSets.append(
                    PPSRecord(
                        id: pps.id, spsId: pps.spsId, offset: nal.streamOffset,
                        entropyCoding: pps.entropyCodingModeCABAC ? "CABAC" : "CAVLC", sliceGroups: pps.numSliceGroups))
            default:
                break
            }
        } catch {
            problems.append(Problem(offset: nal.streamOffset, code: error.code.rawValue, message: error.message))
        }
    }

    /// The record an identical repeat of this parameter set folds into, or nil when it is new
    /// or changed (then it becomes record `next`, the newest for its id).
    private static func repeatedRecord(
        _ nal: NALUnit, id: Int, next: Int, _ newest: inout [Int: (bytes: [UInt8], record: Int)]
    ) -> Int? {
        if let last = newest[id], last.bytes == nal.bytes { return last.record }
        newest[id] = (nal.bytes, next)
        return nil
    }

    private mutating func record(_ unit: AccessUnit) {
        defer { accessUnits += 1 }
        guard unit.hasPicture else { return }
        pictures += 1
        if unit.isIDR {
            keyframes.append(KeyframeRecord(accessUnit: accessUnits, offset: unit.streamOffset, kind: "IDR"))
        } else if unit.isRandomAccessPoint {
            keyframes.append(KeyframeRecord(accessUnit: accessUnits, offset: unit.streamOffset, kind: "recovery point"))
        }
    }

    func json() throws -> String {
        String(decoding: try WireJSON.encoder(indented: true).encode(self), as: UTF8.self)
    }

    func text() -> String {
        var lines: [String] = []
        lines.append("NAL units: \(nalUnits.count) in \(bytes) bytes")
        lines.append(pad("offset", 10) + pad("size", 9) + pad("type", 6) + pad("ref", 4) + "name")
        for nal in nalUnits {
            lines.append(pad("\(nal.offset)", 10) + pad("\(nal.size)", 9) + pad("\(nal.type)", 6) + pad("\(nal.refIdc)", 4) + nal.name)
        }
        lines.append("")
        for sps in sequenceParameterSets {
            let f = sps.format
            lines.append("SPS id \(sps.id) at \(sps.offset)\(sps.repeats > 0 ? " (repeated \(sps.repeats) times)" : ""):")
            lines.append("  display size   \(f.width)x\(f.height)")
            lines.append("  coded size     \(f.codedWidth)x\(f.codedHeight)")
            lines.append("  crop           left \(f.crop.left) right \(f.crop.right) top \(f.crop.top) bottom \(f.crop.bottom)")
            lines.append("  profile        \(f.profile) (profile_idc \(f.profileIdc)), level \(f.level)")
            lines.append("  chroma         \(f.chromaFormat), \(f.bitDepth)-bit luma, \(f.bitDepthChroma)-bit chroma")
            lines.append("  scan           \(sps.frameMbsOnly ? "progressive" : (sps.mbAdaptiveFrameField ? "interlaced (MBAFF)" : "interlaced (fields)"))")
            lines.append("  frame rate     \(f.frameRate.map { "\(fixed($0, 3)) fps" } ?? "not signalled")")
            lines.append("  SAR            \(f.sampleAspectRatio ?? "not signalled")")
            lines.append("  range, colour  \(f.fullRange ? "full" : "limited"), primaries \(f.colorPrimaries), transfer \(f.transfer), matrix \(f.matrix)")
            lines.append("  ref frames     \(sps.maxNumRefFrames), reorder \(sps.maxNumReorderFrames.map(String.init) ?? "not signalled")")
        }
        for pps in pictureParameterSets {
            lines.append("PPS id \(pps.id) at \(pps.offset)\(pps.repeats > 0 ? " (repeated \(pps.repeats) times)" : ""): SPS \(pps.spsId), \(pps.entropyCoding), \(pps.sliceGroups) slice group(s)")
        }
        lines.append("")
        lines.append("access units: \(accessUnits) (\(pictures) with a picture)")
        let positions = keyframes.map { "#\($0.accessUnit)@\($0.offset)\($0.kind == "IDR" ? "" : " (recovery point)")" }
        lines.append("keyframes: \(keyframes.count)" + (positions.isEmpty ? "" : ": " + positions.joined(separator: ", ")))
        for problem in problems {
            lines.append("problem: \(problem.code) at \(problem.offset.map(String.init) ?? "?"): \(problem.message)")
        }
        return lines.joined(separator: "\n")
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}
