import Testing
import TestSupport
@testable import H264
import VideoCoding

/// The conformance streams in the shared test data directory, read in place (never copied into
/// the repository). Tests that need them are skipped when the directory is absent.
enum TestStreams {
    static var available: Bool { TestDataFolder.sharedH264.isPresent }

    static func bytes(_ name: String) throws -> [UInt8] { try TestDataFolder.sharedH264.bytes(name) }

    static func units(_ name: String) throws -> [NALUnit] { AnnexBSplitter.split(try bytes(name)).map(NALUnit.init) }

    static func firstSPS(_ name: String) throws -> SequenceParameterSet {
        let nal = try #require(try units(name).first { $0.type == .sps })
        return try SequenceParameterSet(nal: nal)
    }

    static func accessUnits(_ name: String) throws -> (units: [AccessUnit], assembler: AccessUnitAssembler) {
        var assembler = AccessUnitAssembler()
        var output: [AccessUnit] = []
        for unit in try units(name) { assembler.push(unit) { output.append($0) } }
        assembler.finish { output.append($0) }
        return (output, assembler)
    }
}

@Suite(.enabled(if: TestStreams.available, "shared/testdata/h264 is not present"), .timeLimit(.minutes(10)))
struct RealStreamTests {
    @Test func oddCroppingGives300x168() throws {
        let sps = try TestStreams.firstSPS("CVFC1_Sony_C.jsv")
        #expect(sps.displayWidth == 300 && sps.displayHeight == 168)
        let format = StreamFormat(sps: sps)
        #expect(format.width == 300 && format.height == 168)
        #expect(format.crop.left + format.crop.right == format.codedWidth - 300)
    }

    /// Whether a decoder knows the reorder delay from the SPS alone (the server skips its
    /// reorder probe then): x264-style VUI, Baseline and Intra profiles do; a Main stream
    /// without bitstream_restriction does not.
    @Test func reorderDelayAnnouncement() throws {
        #expect(try TestStreams.firstSPS("BA1_Sony_D.jsv").announcesReorderDelay)
        #expect(try TestStreams.firstSPS("PPH10I1_Panasonic_A.264").announcesReorderDelay)
        #expect(try !TestStreams.firstSPS("Cisco_Men_whisper_640x320_CABAC_Bframe_9.264").announcesReorderDelay)
    }

    @Test func high10Intra720p() throws {
        let sps = try TestStreams.firstSPS("PPH10I1_Panasonic_A.264")
        #expect(sps.profileName == "High 10 Intra")
        #expect(sps.bitDepthLuma == 10 && sps.bitDepthChroma == 10)
        #expect(sps.displayWidth == 1280 && sps.displayHeight == 720)
        let format = StreamFormat(sps: sps)
        #expect(format.bitDepth == 10 && format.chromaFormat == "4:2:0" && format.profile == "High 10 Intra")
    }

    @Test func monochromeWithScalingLists() throws {
        let sps = try TestStreams.firstSPS("HPCVMOLQ_BRCM_B.264")
        #expect(sps.chromaFormatIdc == 0 && sps.chromaArrayType == 0)
        #expect(sps.seqScalingMatrixPresent)
        #expect(sps.displayWidth == 352 && sps.displayHeight == 288)
        #expect(StreamFormat(sps: sps).chromaFormat == "4:0:0")
    }

    @Test func fieldCodedStream() throws {
        let sps = try TestStreams.firstSPS("HCAFF1_HHI.264")
        #expect(!sps.frameMbsOnly)
        #expect(sps.displayWidth == 352 && sps.displayHeight == 288)
        // ffprobe -count_packets reports 14 packets (6 frames + 4 field pairs) and 10 frames.
        let (units, assembler) = try TestStreams.accessUnits("HCAFF1_HHI.264")
        #expect(units.count == 14)
        #expect(units.filter { $0.isField }.count == 8)
        #expect(units.filter { !$0.isField }.count + units.filter { $0.isField }.count / 2 == 10)
        #expect(assembler.malformedUnits == 0)
    }

    /// Access-unit counts equal ffprobe's `-count_packets` (libavcodec's parser) for these streams.
    @Test(arguments: [
        ("BA1_Sony_D.jsv", 17), ("BA1_FT_C.264", 299), ("CVFC1_Sony_C.jsv", 50), ("MIDR_MW_D.264", 100),
        ("MPS_MW_A.264", 150), ("FRExt1_Panasonic.avc", 8), ("HPCVMOLQ_BRCM_B.264", 100),
        ("PPH10I1_Panasonic_A.264", 10), ("Error_I_P.264", 6), ("test_cif_P_CABAC_slice.264", 300),
        ("BA_MW_D_P_LOST.264", 99), ("Cisco_Men_whisper_640x320_CABAC_Bframe_9.264", 9),
    ])
    func accessUnitCounts(name: String, expected: Int) throws {
        let (units, assembler) = try TestStreams.accessUnits(name)
        #expect(units.count == expected)
        #expect(units.allSatisfy { $0.hasPicture })
        #expect(units.first?.isRandomAccessPoint == true)
        #expect(assembler.malformedUnits == 0, "\(String(describing: assembler.lastError))")
        #expect(assembler.slicesWithUnknownParameterSets == 0)
    }

    @Test func everyParameterSetParses() throws {
        for name in ["BA1_Sony_D.jsv", "BA1_FT_C.264", "CVFC1_Sony_C.jsv", "MIDR_MW_D.264", "MPS_MW_A.264",
                     "FRExt1_Panasonic.avc", "HCAFF1_HHI.264", "HPCVMOLQ_BRCM_B.264", "PPH10I1_Panasonic_A.264",
                     "Error_I_P.264", "test_cif_P_CABAC_slice.264", "sps_subsetsps_bothVUI.264",
                     "Cisco_Men_whisper_640x320_CABAC_Bframe_9.264"]
        {
            var sets = ParameterSets()
            for unit in try TestStreams.units(name) where unit.type == .sps || unit.type == .pps {
                #expect(throws: Never.self, "\(name)") { try sets.update(with: unit) }
            }
            #expect(!sets.sps.isEmpty && !sets.pps.isEmpty, "\(name)")
        }
    }

    @Test func resolutionChangeMidStream() throws {
        let sizes = try TestStreams.units("Error_I_P.264").filter { $0.type == .sps }
            .map { try SequenceParameterSet(nal: $0) }.map { "\($0.displayWidth)x\($0.displayHeight)" }
        #expect(sizes.first == "352x288")
        #expect(sizes.contains("640x480"))
    }

    @Test func svcOnlyStreamHasNoBasePicture() throws {
        let (units, _) = try TestStreams.accessUnits("sps_subsetsps_bothVUI.264")
        #expect(!units.contains { $0.hasPicture })
        let sps = try TestStreams.firstSPS("sps_subsetsps_bothVUI.264")
        #expect(sps.vui != nil)
    }

    @Test func oneByteChunksGiveTheSameUnits() throws {
        let bytes = try TestStreams.bytes("FRExt1_Panasonic.avc")
        let whole = AnnexBSplitter.split(bytes)
        var splitter = AnnexBSplitter()
        var pieces: [AnnexBUnit] = []
        for byte in bytes { splitter.push([byte]) { if case .unit(let unit) = $0 { pieces.append(unit) } } }
        splitter.finish { if case .unit(let unit) = $0 { pieces.append(unit) } }
        #expect(pieces == whole)
        #expect(splitter.bytesConsumed == bytes.count)
    }

    @Test func avcCFromARealStreamRoundTrips() throws {
        let units = try TestStreams.units("PPH10I1_Panasonic_A.264")
        let record = try AVCDecoderConfigurationRecord(
            sps: units.filter { $0.type == .sps }.prefix(1).map { $0 }, pps: units.filter { $0.type == .pps }.prefix(1).map { $0 })
        #expect(record.profileIndication == 110 && record.bitDepthLuma == 10 && record.chromaFormat == 1)
        #expect(try AVCDecoderConfigurationRecord(parsing: record.serialized()) == record)
    }
}
