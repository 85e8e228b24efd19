import Bitstream
import Foundation
import TestSupport
import Testing
import VideoCoding

/// The project's fixtures and the shared H.265 streams, read in place.
enum Streams {
    /// Every H.265 stream: the .265 fixtures and, when present, the shared .h265 ones.
    static let h265 = TestDataFolder.fixtures.names(endingWith: ".265") + TestDataFolder.sharedH265.names(endingWith: ".h265")

    static func folder(_ name: String) -> TestDataFolder { name.hasSuffix(".h265") ? .sharedH265 : .fixtures }
    static func url(_ name: String) -> URL { folder(name).url(name) }
    static func bytes(_ name: String) throws -> [UInt8] { try folder(name).bytes(name) }

    static func describe(_ bytes: [UInt8], codec: VideoCodec? = nil, pieces: Int? = nil) -> StreamDescription {
        var probe = StreamProbe(codec: codec)
        let size = max(1, pieces ?? bytes.count)
        var offset = 0
        while offset < bytes.count {
            probe.push(Array(bytes[offset..<min(offset + size, bytes.count)]))
            offset += size
        }
        return probe.finish()
    }

    static let ffprobe = ["/usr/bin/ffprobe", "/usr/local/bin/ffprobe"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// `ffprobe -show_entries` of a raw stream, as key=value lines.
    static func ffprobe(_ url: URL, format: String, _ entries: String) throws -> String {
        let probe = try #require(ffprobe)
        let arguments = ["-v", "error", "-f", format, "-show_entries", entries, "-of", "default=nw=1", url.path]
        return String(decoding: try runProgram(probe, arguments), as: UTF8.self)
    }
}

/// What `frametap probe` shows (the front's `StreamDescription`) against what ffprobe says of
/// the same stream.
@Suite(.enabled(if: Streams.ffprobe != nil, "needs ffprobe"), .timeLimit(.minutes(10)))
struct StreamProbeTests {
    /// ffprobe -show_streams: profile, level, size after the conformance window, coded size,
    /// pix_fmt (bit depth, chroma, range), colour description, frame rate, field order.
    @Test(arguments: Streams.h265)
    func theSPSFactsAreFFprobes(_ name: String) throws {
        let description = Streams.describe(try Streams.bytes(name))
        #expect(description.codec == .h265)
        #expect(description.problems.isEmpty)
        let sps = try #require(description.parameterSets(.sps).first)
        let format = try #require(sps.format)
        var probed: [String: String] = [:]
        let text = try Streams.ffprobe(
            Streams.url(name), format: "hevc",
            "stream=width,height,coded_width,coded_height,profile,level,pix_fmt,color_range,color_space,color_transfer,"
                + "color_primaries,r_frame_rate,field_order")
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { probed[parts[0]] = parts[1] }
        }
        #expect("\(format.width)x\(format.height)" == "\(probed["width"] ?? "")x\(probed["height"] ?? "")")
        #expect("\(format.codedWidth)x\(format.codedHeight)" == "\(probed["coded_width"] ?? "")x\(probed["coded_height"] ?? "")")
        // ffprobe calls every format range extensions profile "Rext".
        #expect((format.profileIdc == 4 ? "Rext" : format.profile) == probed["profile"])
        #expect(sps.fields.contains(KeyedFact("levelIdc", .integer(Int(probed["level"] ?? "") ?? -1))))
        #expect(Self.pixelFormat(format) == probed["pix_fmt"])
        #expect((format.fullRange ? "pc" : "tv") == probed["color_range"])
        func named(_ ours: String) -> String { ours == "unspecified" ? "unknown" : ours }
        #expect(named(format.colorPrimaries) == probed["color_primaries"])
        #expect(named(format.transfer) == probed["color_transfer"])
        #expect(named(format.matrix) == probed["color_space"])
        let rate = (probed["r_frame_rate"] ?? "").split(separator: "/").compactMap { Double($0) }
        #expect(rate.count == 2 && abs((format.frameRate ?? 0) - rate[0] / rate[1]) < 0.001)
        #expect(!format.interlaced && ["unknown", "progressive"].contains(probed["field_order"]))
        #expect(sps.facts.contains(LabelledFact("display size", "\(format.width)x\(format.height)")))
    }

    /// Access units are ffprobe's packets (libavcodec's parser's), keyframes its K packets.
    @Test(arguments: Streams.h265)
    func accessUnitsAndKeyframesAreFFprobesPackets(_ name: String) throws {
        let bytes = try Streams.bytes(name)
        let description = Streams.describe(bytes)
        let flags = try Streams.ffprobe(Streams.url(name), format: "hevc", "packet=flags").split(separator: "\n")
        #expect(description.accessUnits == flags.count)
        #expect(description.pictures == flags.count)
        let keyframes = flags.indices.filter { flags[$0].contains("K") }
        #expect(description.keyframes.map(\.accessUnit) == keyframes)
        #expect(description.nalUnits.count == AnnexBSplitter.split(bytes).count)
        #expect(description.nalUnits.map(\.offset) == AnnexBSplitter.split(bytes).map(\.streamOffset))
    }

    /// libavcodec's output format for a sequence (what ffprobe's pix_fmt says).
    static func pixelFormat(_ format: StreamFormat) -> String {
        let depth = format.bitDepth == 8 ? "" : "\(format.bitDepth)le"
        switch format.chromaFormat {
        case "4:0:0": return "gray" + depth
        case "4:2:2": return (format.fullRange && depth.isEmpty ? "yuvj422p" : "yuv422p") + depth
        case "4:4:4": return (format.fullRange && depth.isEmpty ? "yuvj444p" : "yuv444p") + depth
        default: return (format.fullRange && depth.isEmpty ? "yuvj420p" : "yuv420p") + depth
        }
    }
}

/// The probe's own promises: any chunking, detection with units held, a stated codec.
@Suite(.timeLimit(.minutes(10))) struct StreamProbeBehaviourTests {
    @Test(arguments: ["open_gop_176x144.265", "res_change_176x144_320x240.265", "high_320x240.264"])
    func anyChunkingDescribesTheSame(_ name: String) throws {
        let bytes = try Streams.bytes(name)
        let whole = Streams.describe(bytes)
        for pieces in [1, 7, 1000] {
            let chunked = Streams.describe(bytes, pieces: pieces)
            #expect(chunked.nalUnits == whole.nalUnits)
            #expect(chunked.parameterSets == whole.parameterSets)
            #expect(chunked.accessUnits == whole.accessUnits && chunked.keyframes == whole.keyframes)
            #expect(chunked.problems == whole.problems)
        }
    }

    @Test func eachCodecHasItsHeaderFieldsAndParameterSets() throws {
        let h265 = Streams.describe(try Streams.bytes("repeat_headers_176x144.265"))
        #expect(h265.headerFields.map(\.key) == ["layerId", "temporalId"])
        #expect(h265.parameterSetKinds == [.vps, .sps, .pps])
        // Identical repeats fold into one record per set: three IDRs, each with its sets.
        #expect(h265.parameterSets.map(\.kind) == [.vps, .sps, .pps])
        #expect(h265.parameterSets.map(\.repeats) == [2, 2, 2])
        #expect(h265.keyframes.map(\.kind) == ["IDR", "IDR", "IDR"])
        let h264 = Streams.describe(try Streams.bytes("repeat_headers_176x144.264"))
        #expect(h264.codec == .h264)
        #expect(h264.headerFields.map(\.key) == ["refIdc"])
        #expect(h264.parameterSetKinds == [.sps, .pps])
    }

    @Test func anOpenGOPsKeyframesAreItsIDRAndCRAs() throws {
        let description = Streams.describe(try Streams.bytes("open_gop_176x144.265"))
        #expect(description.keyframes.map(\.kind) == ["IDR", "CRA", "CRA", "CRA"])
    }

    /// Units before the first parameter set wait for it, then are described in their place.
    @Test func unitsBeforeTheFirstParameterSetAreDescribedOnceTheCodecIsKnown() throws {
        let stream = try Streams.bytes("main_bframes_176x144.265")
        let slices = HEVCEdits.units(stream).filter { HEVCEdits.type($0) < 32 }.prefix(4)
        let bytes = HEVCEdits.stream(Array(slices)) + stream
        let description = Streams.describe(bytes, pieces: 333)
        #expect(description.codec == .h265)
        #expect(description.nalUnits.map(\.offset) == AnnexBSplitter.split(bytes).map(\.streamOffset))
        let sliceNames = Streams.describe(stream).nalUnits.filter { $0.type < 32 }.prefix(4).map(\.name)
        #expect(description.nalUnits.prefix(4).map(\.name) == sliceNames)
        #expect(description.pictures == 25 + 4)
    }

    @Test func neitherCodecIsNoCodec() throws {
        let slices = HEVCEdits.units(try Streams.bytes("main_bframes_176x144.265")).filter { HEVCEdits.type($0) < 32 }
        let description = Streams.describe(HEVCEdits.stream(slices))
        #expect(description.codec == nil)
        #expect(description.unitsOfUnknownCodec == slices.count && description.nalUnits.isEmpty)
        let noise = Streams.describe((0..<5000).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) | 1 })
        #expect(noise.codec == nil && noise.unitsOfUnknownCodec == 0 && noise.bytes == 5000)
    }

    /// Stated: read as that codec whatever comes, and the other codec's parameter set is a problem.
    @Test func aStatedCodecIsKeptAndTheOtherIsAProblem() throws {
        let description = Streams.describe(try Streams.bytes("main_bframes_176x144.265"), codec: .h264)
        #expect(description.codec == .h264)
        #expect(description.problems.map(\.code) == ["codec_mismatch"])
        #expect(description.problems.first?.message.contains("(stated)") == true)
        let slices = HEVCEdits.units(try Streams.bytes("main_bframes_176x144.265")).filter { HEVCEdits.type($0) < 32 }
        let stated = Streams.describe(HEVCEdits.stream(slices), codec: .h265)
        #expect(stated.codec == .h265 && stated.nalUnits.count == slices.count && stated.pictures == 25)
    }

    /// A parameter set that cannot be read is a problem at its offset, the rest is described.
    @Test func anUnreadableSPSIsAProblem() throws {
        let bytes = HEVCEdits.changingSPS(try Streams.bytes("main_bframes_176x144.265"), .init(bitDepthLuma: 17))
        let description = Streams.describe(bytes)
        #expect(description.problems.map(\.code) == ["invalid_data"])
        #expect(description.problems.first?.message.contains("bit_depth_luma_minus8") == true)
        #expect(description.parameterSets(.sps).isEmpty && description.pictures == 25)
    }

    /// Past `maxHeldBytes` before the first parameter set, the oldest units are listed but not
    /// assembled, and the probe says so.
    @Test func heldUnitsAreBounded() throws {
        let stream = try Streams.bytes("main_bframes_176x144.265")
        let sliceUnits = HEVCEdits.units(stream).filter { HEVCEdits.type($0) < 32 }
        let slices = HEVCEdits.stream(sliceUnits)
        // The bound counts the units' bytes, not their start codes.
        let copies = StreamProbe.maxHeldBytes / sliceUnits.reduce(0) { $0 + $1.count } + 2
        let bytes = Array(repeating: slices, count: copies).flatMap { $0 } + stream
        let description = Streams.describe(bytes, pieces: 1 << 20)
        #expect(description.nalUnits.count == AnnexBSplitter.split(bytes).count)
        #expect(description.problems.count == 1)
        #expect(description.problems.first?.message.contains("listed but not assembled") == true)
    }
}

/// The front's two entry points: which codec a parameter set is, and that codec's reader.
@Suite(.timeLimit(.minutes(10))) struct CodecFrontTests {
    @Test func everyFixturesFirstParameterSetNamesItsCodec() throws {
        for name in TestDataFolder.fixtures.names(endingWith: ".264") + TestDataFolder.fixtures.names(endingWith: ".265") {
            let units = AnnexBSplitter.split(try Streams.bytes(name))
            let codecs = Set(units.compactMap(CodecDetector.codec(ofParameterSet:)))
            #expect(codecs == [name.hasSuffix(".265") ? .h265 : .h264], "\(name)")
        }
    }

    @Test func eachCodecGetsItsReader() {
        for codec in VideoCodec.allCases {
            #expect(Codecs.reader(for: codec).codec == codec)
            #expect(NALUnitNames.of(codec).parameterSets.map(\.name).contains("sps"))
        }
        #expect(NALUnitNames.of(.h265).slices.count == 16 && NALUnitNames.of(.h265).randomAccess.count == 6)
        #expect(NALUnitNames.of(.h264).slices == ["idr", "slice", "slice_data_a"])
    }
}

/// What a reader hands a decoder: a parameter set counts as carried by an access unit only when
/// that very set is in it (else `BackendSupervisor` would not send the one the picture uses to
/// a decoder that has not had it, e.g. after a fallback).
@Suite(.timeLimit(.minutes(10))) struct CarriedParameterSetTests {
    /// An H.264 PPS with id 1 (of SPS 0, CAVLC), which no slice of the fixture uses.
    static func unusedPPS() -> [UInt8] {
        var writer = BitWriter()
        writer.ue(1)
        writer.ue(0)
        writer.u(2, 0)  // entropy_coding_mode_flag, bottom_field_pic_order_in_frame_present_flag
        writer.ue(0)  // num_slice_groups_minus1
        writer.ue(0)
        writer.ue(0)
        writer.u(3, 0)  // weighted_pred_flag, weighted_bipred_idc
        writer.se(0)
        writer.se(0)
        writer.se(0)
        writer.u(3, 0b100)  // deblocking_filter_control_present_flag, constrained_intra_pred, redundant_pic_cnt
        writer.trailingBits()
        return [0x68] + RBSP.escape(writer.bytes)
    }

    @Test func aSetOfAnotherIdInTheAccessUnitIsNotTheOneUsed() throws {
        let units = AnnexBSplitter.split(try Streams.bytes("baseline_176x144.264"))
        let second = try #require(units.indices.filter { units[$0].bytes[0] & 0x1F == 1 }.first)
        var edited = units.map { Array($0.bytes) }
        edited.insert(Self.unusedPPS(), at: second)
        var reader = Codecs.reader(for: .h264)
        var coded: [CodedAccessUnit] = []
        for (offset, bytes) in edited.enumerated() {
            reader.push(AnnexBUnit(bytes: bytes, streamOffset: offset)) { if case .accessUnit(let unit) = $0 { coded.append(unit) } }
        }
        reader.finish { if case .accessUnit(let unit) = $0 { coded.append(unit) } }
        #expect(coded.count == 20)
        // The first access unit carries its SPS and PPS 0; the second carries PPS 1 only.
        #expect(coded[0].parameterSets.map(\.carriedByAccessUnit) == [true, true])
        #expect(coded[1].nalUnits.first.map { Array($0.bytes) } == Self.unusedPPS())
        #expect(coded[1].parameterSets.map(\.key) == [ParameterSetKey(.sps, 0), ParameterSetKey(.pps, 0)])
        #expect(coded[1].parameterSets.map(\.carriedByAccessUnit) == [false, false])
    }
}
