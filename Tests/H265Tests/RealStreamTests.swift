import Foundation
import H265
import Testing
import VideoCoding

/// What ffprobe -show_streams says of a stream, measured once and written here so the tests
/// run without ffmpeg (`ffprobe -f hevc -show_entries stream=...` with libavcodec 5.1), and
/// how many packets (access units of libavcodec's parser) `-show_packets` lists.
struct ProbedStream: CustomTestStringConvertible, Sendable {
    var name: String
    var width: Int
    var height: Int
    var codedWidth: Int
    var codedHeight: Int
    /// ffprobe's profile name ("Rext" for every format range extensions profile).
    var profile: String
    var levelIdc: Int
    var pixFmt: String
    /// ffprobe's color_range is "pc".
    var fullRange: Bool
    /// ffprobe's names; "unknown" is ColourDescription's "unspecified".
    var primaries: String
    var transfer: String
    var matrix: String
    var frameRate: Double
    var sampleAspectRatio: String?
    var packets: Int

    /// Most fixtures are 8-bit 4:2:0 Main at level 2 (60), 25 fps, square pixels and no colour
    /// description; a row names only what differs (its coded size only where it is cropped).
    init(
        name: String, width: Int, height: Int, codedWidth: Int? = nil, codedHeight: Int? = nil, profile: String = "Main",
        levelIdc: Int = 60, pixFmt: String = "yuv420p", fullRange: Bool = false, colour: String = "unknown",
        frameRate: Double = 25, sampleAspectRatio: String? = "1:1", packets: Int
    ) {
        self.name = name
        self.width = width
        self.height = height
        self.codedWidth = codedWidth ?? width
        self.codedHeight = codedHeight ?? height
        self.profile = profile
        self.levelIdc = levelIdc
        self.pixFmt = pixFmt
        self.fullRange = fullRange
        (primaries, transfer, matrix) = (colour, colour, colour)
        self.frameRate = frameRate
        self.sampleAspectRatio = sampleAspectRatio
        self.packets = packets
    }

    var testDescription: String { name }
    var isShared: Bool { name.hasSuffix(".h265") }

    /// Bit depth and chroma format of libavcodec's output format.
    var depthAndChroma: (Int, String) {
        switch pixFmt {
        case "yuv420p", "yuvj420p": (8, "4:2:0")
        case "yuv420p10le": (10, "4:2:0")
        case "yuv422p10le": (10, "4:2:2")
        case "yuv444p": (8, "4:4:4")
        case "gray": (8, "4:0:0")
        default: (0, pixFmt)
        }
    }

    static let fixtures: [ProbedStream] = [
        .init(name: "main_bframes_176x144.265", width: 176, height: 144, packets: 25),
        .init(name: "main10_320x240.265", width: 320, height: 240, profile: "Main 10", pixFmt: "yuv420p10le", packets: 12),
        .init(name: "slices4_320x240.265", width: 320, height: 240, packets: 15),
        .init(name: "wpp_320x240.265", width: 320, height: 240, packets: 15),
        .init(name: "open_gop_176x144.265", width: 176, height: 144, packets: 30),
        .init(name: "radl_176x144.265", width: 176, height: 144, packets: 30),
        .init(name: "yuv422p10_176x144.265", width: 176, height: 144, profile: "Rext", pixFmt: "yuv422p10le", packets: 10),
        .init(name: "yuv444p_176x144.265", width: 176, height: 144, profile: "Rext", pixFmt: "yuv444p", packets: 10),
        .init(name: "gray_176x144.265", width: 176, height: 144, profile: "Rext", pixFmt: "gray", fullRange: true, packets: 10),
        .init(name: "fullrange_bt709_176x144.265", width: 176, height: 144, pixFmt: "yuvj420p", fullRange: true, colour: "bt709",
              packets: 10),
        .init(name: "odd_crop_322x242.265", width: 322, height: 242, codedWidth: 328, codedHeight: 248, packets: 10),
        .init(name: "repeat_headers_176x144.265", width: 176, height: 144, packets: 20),
        .init(name: "headers_once_176x144.265", width: 176, height: 144, packets: 20),
        // ffprobe describes the first SPS only; the second size is checked below.
        .init(name: "res_change_176x144_320x240.265", width: 176, height: 144, packets: 20),
    ]

    static let shared: [ProbedStream] = [
        .init(name: "64x64-I.h265", width: 64, height: 64, levelIdc: 63, colour: "smpte170m", frameRate: 30, packets: 1),
        .init(name: "64x64-I-P.h265", width: 64, height: 64, levelIdc: 63, colour: "smpte170m", frameRate: 30, packets: 2),
        .init(name: "64x64-I-P-B-P.h265", width: 64, height: 64, levelIdc: 63, colour: "smpte170m", frameRate: 30, packets: 3),
        .init(name: "bbb.h265", width: 176, height: 144, frameRate: 60, sampleAspectRatio: "16:11", packets: 60),
        .init(name: "bear.h265", width: 320, height: 180, codedWidth: 320, codedHeight: 184, frameRate: 29.97,
              sampleAspectRatio: nil, packets: 30),
        .init(name: "test-25fps.h265", width: 320, height: 240, sampleAspectRatio: nil, packets: 250),
    ]

    /// The fixtures, and the shared streams where shared/testdata/h265 is present.
    static var available: [ProbedStream] { fixtures + (Streams.sharedAvailable ? shared : []) }
}

@Suite(.timeLimit(.minutes(10))) struct FixtureStreamTests {
    @Test(arguments: ProbedStream.available)
    func parameterSetsDescribeWhatFFprobeSays(_ stream: ProbedStream) throws {
        try checkParameterSets(stream)
    }

    @Test(arguments: ProbedStream.available)
    func accessUnitsAreFFprobesPackets(_ stream: ProbedStream) throws {
        try checkAccessUnits(stream)
    }

    @Test(arguments: ProbedStream.available)
    func anyChunkingGivesTheSameAccessUnits(_ stream: ProbedStream) throws {
        try checkChunkings(stream)
    }

    @Test func resolutionChangeReplacesTheSPS() throws {
        let sizes = try Streams.units("res_change_176x144_320x240.265").filter { $0.type == .sps }
            .map { try SequenceParameterSet(nal: $0) }.map { "\($0.displayWidth)x\($0.displayHeight)" }
        #expect(sizes == ["176x144", "320x240"])
        let (units, _) = try Streams.accessUnits("res_change_176x144_320x240.265")
        // Both streams use SPS 0 and PPS 0: each picture has the sets of its own stream.
        #expect(units.prefix(10).allSatisfy { $0.sps?.codedWidth == 176 })
        #expect(units.suffix(10).allSatisfy { $0.sps?.codedWidth == 320 })
        #expect(units.filter(\.isIDR).count == 2)
    }

    @Test func parameterSetsOnlyAtTheStartStayKnown() throws {
        let (units, assembler) = try Streams.accessUnits("headers_once_176x144.265")
        #expect(units.filter { $0.nalUnits.contains { $0.type == .sps } }.count == 1)
        #expect(units.filter(\.isIDR).count == 3)
        #expect(units.allSatisfy { $0.sps != nil && $0.pps != nil && $0.sliceType != nil })
        #expect(assembler.slicesWithUnknownParameterSets == 0)
        let repeated = try Streams.accessUnits("repeat_headers_176x144.265").units
        #expect(repeated.filter { $0.nalUnits.contains { $0.type == .sps } }.count == 3)
        #expect(repeated.filter { $0.nalUnits.contains { $0.type == .sps } }.allSatisfy { $0.isIDR })
    }

    @Test func audAndSuffixSEIBelongToTheirPicture() throws {
        let (units, _) = try Streams.accessUnits("main_bframes_176x144.265")
        // Every access unit: AUD first, the picture, then its MD5 picture hash (suffix SEI).
        #expect(units.allSatisfy { $0.nalUnits.first?.type == .aud && $0.nalUnits.last?.type == .suffixSEI })
        // Non-reference B pictures sit in temporal sub-layer 1.
        #expect(units.contains { $0.temporalId == 1 && $0.pictureType == .tsaN })
        #expect(units.filter { $0.temporalId == 0 }.allSatisfy { $0.pictureType != .tsaN })
        #expect(units.filter { $0.sliceType == .b }.count > 10)
    }

    @Test func slicesOfAPictureStayTogether() throws {
        let (units, _) = try Streams.accessUnits("slices4_320x240.265")
        for unit in units {
            let segments = unit.nalUnits.filter { $0.type.isSliceSegment }
            #expect(segments.count == 4)
            #expect(segments.map { SliceSegmentHeader.startsPicture($0) } == [true, false, false, false])
            let addresses = try segments.map { try SliceSegmentHeader(nal: $0, parameterSets: unit.parameterSets).sliceSegmentAddress }
            // 320x240 in 64x64 blocks is 5x4; x265 cuts slices at whole rows.
            #expect(addresses == [0, 5, 10, 15])
        }
        #expect(try #require(units.first?.pps).entropyCodingSyncEnabled)
    }

    @Test func wavefrontsAreSignalled() throws {
        let (units, _) = try Streams.accessUnits("wpp_320x240.265")
        #expect(try #require(units.first?.pps).entropyCodingSyncEnabled)
        #expect(units.first?.pps?.tilesEnabled == false)
        #expect(try Streams.accessUnits("main10_320x240.265").units.first?.pps?.entropyCodingSyncEnabled == false)
    }

    @Test func leadingPictures() throws {
        let openGOP = try Streams.accessUnits("open_gop_176x144.265").units
        #expect(openGOP.map(\.pictureType).filter { $0 == .cra }.count == 3)
        #expect(openGOP.first?.pictureType == .idrNoLeadingPictures)
        #expect(openGOP.contains { $0.pictureType == .raslN } && openGOP.contains { $0.pictureType == .raslR })
        let radl = try Streams.accessUnits("radl_176x144.265").units
        #expect(radl.map(\.pictureType).filter { $0 == .idrWithRADL }.count == 3)
        #expect(radl.contains { $0.isRADL } && !radl.contains { $0.isRASL })
    }

    @Test func formatOfARangeExtensionsStream() throws {
        let sps = try #require(try Streams.accessUnits("yuv422p10_176x144.265").units.first?.sps)
        let format = StreamFormat(sps: sps)
        #expect(format.codec == .h265 && format.profile == "Main 4:2:2 10" && format.profileIdc == 4)
        #expect(format.tier == "Main" && format.level == "2")
        #expect(format.chromaFormat == "4:2:2" && format.bitDepth == 10 && format.bitDepthChroma == 10)
        #expect(StreamFormat(sps: try #require(try Streams.accessUnits("yuv444p_176x144.265").units.first?.sps)).profile == "Main 4:4:4")
        #expect(StreamFormat(sps: try #require(try Streams.accessUnits("gray_176x144.265").units.first?.sps)).profile == "Monochrome")
    }

    @Test func formatNamesTheCodecTierAndColour() throws {
        let unit = try #require(try Streams.accessUnits("fullrange_bt709_176x144.265").units.first)
        let format = StreamFormat(sps: try #require(unit.sps), vps: unit.parameterSets.vps[0])
        #expect(format.codec == .h265 && format.tier == "Main")
        #expect(format.colorPrimaries == "bt709" && format.fullRange)
    }
}

@Suite(.enabled(if: Streams.sharedAvailable, "shared/testdata/h265 is not present"), .timeLimit(.minutes(10)))
struct SharedStreamTests {
    @Test func wavefrontsAndCropping() throws {
        let bear = try Streams.accessUnits("bear.h265").units
        let sps = try #require(bear.first?.sps)
        #expect(sps.conformanceWindow == SequenceParameterSet.Window(left: 0, right: 0, top: 0, bottom: 2))
        #expect(sps.cropRect.width == 320 && sps.cropRect.height == 180 && sps.cropRect.x == 0 && sps.cropRect.y == 0)
        #expect(bear.first?.pps?.entropyCodingSyncEnabled == true)
        #expect(try Streams.accessUnits("bbb.h265").units.first?.pps?.entropyCodingSyncEnabled == true)
    }
}

/// Every parameter set of the stream parses; the first SPS (with its VPS, whose timing
/// libavcodec prefers) says what ffprobe says.
private func checkParameterSets(_ stream: ProbedStream) throws {
    var sets = ParameterSets()
    for unit in try Streams.units(stream.name) where [.vps, .sps, .pps].contains(unit.type) {
        #expect(throws: Never.self, "\(unit.type.name) at \(unit.streamOffset)") { try sets.update(with: unit) }
    }
    let first = try #require(try Streams.units(stream.name).first { $0.type == .sps })
    let sps = try SequenceParameterSet(nal: first)
    #expect(!sps.vuiMalformed)
    let format = StreamFormat(sps: sps, vps: sets.vps[sps.vpsId])
    #expect(format.width == stream.width && format.height == stream.height)
    #expect(format.codedWidth == stream.codedWidth && format.codedHeight == stream.codedHeight)
    #expect(format.crop.left + format.crop.right == stream.codedWidth - stream.width)
    #expect(format.crop.top + format.crop.bottom == stream.codedHeight - stream.height)
    if stream.profile == "Rext" {
        #expect(sps.profileTierLevel.effectiveProfileIdc == 4 && format.profile != "Rext")
    } else {
        #expect(format.profile == stream.profile)
    }
    #expect(sps.profileTierLevel.levelIdc == stream.levelIdc)
    #expect(format.level == "\(stream.levelIdc / 30)" + (stream.levelIdc % 30 == 0 ? "" : ".\(stream.levelIdc % 30 / 3)"))
    let (depth, chroma) = stream.depthAndChroma
    #expect(format.bitDepth == depth && format.bitDepthChroma == (chroma == "4:0:0" ? format.bitDepthChroma : depth))
    #expect(format.chromaFormat == chroma)
    #expect(format.fullRange == stream.fullRange)
    func named(_ ffprobeName: String) -> String { ffprobeName == "unknown" ? "unspecified" : ffprobeName }
    #expect(format.colorPrimaries == named(stream.primaries))
    #expect(format.transfer == named(stream.transfer))
    #expect(format.matrix == named(stream.matrix))
    #expect(abs((format.frameRate ?? 0) - stream.frameRate) < 0.001)
    #expect(format.sampleAspectRatio == stream.sampleAspectRatio)
    #expect(format.tier == "Main" && !format.interlaced)
}

/// As many access units as ffprobe has packets, each with a picture; and, where ffprobe is
/// installed, every NAL unit of the n-th access unit inside the bytes of its n-th packet, whose
/// first start code it begins with.
private func checkAccessUnits(_ stream: ProbedStream) throws {
    let bytes = try Streams.bytes(stream.name)
    let (units, assembler) = Streams.accessUnits(bytes)
    #expect(units.count == stream.packets)
    #expect(units.allSatisfy { $0.hasPicture && $0.sliceType != nil && $0.sps != nil })
    #expect(units.first?.isIRAP == true)
    #expect(assembler.malformedUnits == 0, "\(String(describing: assembler.lastError))")
    #expect(assembler.slicesWithUnknownParameterSets == 0 && assembler.unitsOutsideBaseLayer == 0)
    #expect(units.flatMap(\.nalUnits).map(\.bytes) == Streams.units(bytes).map(\.bytes))
    guard Streams.ffprobe != nil else { return }
    let packets = try Streams.ffprobePackets(Streams.url(stream.name))
    try #require(packets.count == units.count)
    for (index, (unit, packet)) in zip(units, packets).enumerated() {
        let range = packet.position..<(packet.position + packet.size)
        #expect(
            unit.nalUnits.allSatisfy { range.contains($0.streamOffset) && $0.streamOffset + $0.bytes.count <= range.upperBound },
            "access unit \(index) at \(unit.streamOffset) lies in packet \(index) at \(range)")
        #expect(index == 0 || Streams.packetStartCandidates(before: unit.streamOffset, in: bytes).contains(packet.position))
    }
}

/// One byte at a time, in odd pieces and whole, with early ends: the same access units.
private func checkChunkings(_ stream: ProbedStream) throws {
    let bytes = try Streams.bytes(stream.name)
    let whole = Streams.accessUnits(bytes).units.map { $0.nalUnits.map(\.bytes) }
    for pieces in [1, 7, 1000] {
        let chunked = Streams.accessUnits(bytes, pieces: pieces).units.map { $0.nalUnits.map(\.bytes) }
        #expect(chunked == whole, "\(pieces)-byte pieces")
    }
}
