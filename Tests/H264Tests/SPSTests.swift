import Testing
@testable import H264
import VideoCoding

@Suite(.timeLimit(.minutes(10))) struct SPSTests {
    @Test func plainHigh1080p() throws {
        let sps = try SPSBuilder(
            levelIdc: 40, id: 3, log2MaxFrameNum: 9, maxNumRefFrames: 4, gaps: true, widthInMbs: 120, heightInMapUnits: 68,
            crop: (0, 0, 0, 4)
        ).parsed()
        #expect(sps.id == 3)
        #expect(sps.profileName == "High")
        #expect(sps.levelName == "4")
        #expect(sps.chromaFormatIdc == 1)
        #expect(sps.bitDepthLuma == 8 && sps.bitDepthChroma == 8)
        #expect(sps.log2MaxFrameNum == 9)
        #expect(sps.pocType == 0)
        #expect(sps.picOrderCount == .type0(log2MaxPicOrderCntLsb: 6))
        #expect(sps.maxNumRefFrames == 4)
        #expect(sps.gapsInFrameNumAllowed)
        #expect(sps.codedWidth == 1920 && sps.codedHeight == 1088)
        #expect(sps.displayWidth == 1920 && sps.displayHeight == 1080)
        #expect(sps.cropRect.x == 0 && sps.cropRect.y == 0 && sps.cropRect.width == 1920 && sps.cropRect.height == 1080)
        #expect(sps.frameMbsOnly && !sps.mbAdaptiveFrameField && sps.direct8x8Inference)
        #expect(sps.vui == nil && !sps.vuiMalformed)
    }

    @Test(arguments: [
        (66, UInt8(0x40), "Constrained Baseline"), (66, 0xC0, "Constrained Baseline"), (66, 0, "Baseline"),
        (77, 0, "Main"), (88, 0, "Extended"), (100, 0, "High"), (100, 0x08, "Progressive High"),
        (100, 0x0C, "Constrained High"), (110, 0, "High 10"), (110, 0x10, "High 10 Intra"),
        (122, 0, "High 4:2:2"), (122, 0x10, "High 4:2:2 Intra"), (244, 0, "High 4:4:4 Predictive"),
        (244, 0x10, "High 4:4:4 Intra"), (44, 0, "CAVLC 4:4:4 Intra"), (83, 0, "Scalable Baseline"),
        (86, 0, "Scalable High"), (118, 0, "Multiview High"), (128, 0, "Stereo High"),
        (138, 0, "Multiview Depth High"), (139, 0, "Enhanced Multiview Depth High"), (134, 0, "MFC High"),
        (135, 0, "MFC Depth High"), (42, 0, "Unknown (42)"),
    ])
    func profileNames(profile: Int, constraints: UInt8, name: String) throws {
        let sps = try SPSBuilder(profileIdc: profile, constraintFlags: constraints).parsed()
        #expect(sps.profileName == name)
        #expect(sps.constraintFlags.byte == constraints)
    }

    @Test(arguments: [
        (66, 11, UInt8(0x10), "1b"), (77, 11, 0x10, "1b"), (88, 11, 0x10, "1b"), (100, 11, 0x10, "1.1"),
        (100, 9, 0, "1b"), (66, 11, 0, "1.1"), (77, 31, 0, "3.1"), (100, 30, 0, "3"), (100, 52, 0, "5.2"),
        (100, 10, 0, "1"),
    ])
    func levelNames(profile: Int, level: Int, constraints: UInt8, name: String) throws {
        #expect(try SPSBuilder(profileIdc: profile, constraintFlags: constraints, levelIdc: level).parsed().levelName == name)
    }

    @Test func constraintFlagBits() {
        let flags = SequenceParameterSet.ConstraintFlags(byte: 0b1010_1000)
        #expect(flags.set0 && !flags.set1 && flags.set2 && !flags.set3 && flags.set4 && !flags.set5)
    }

    @Test func scalingListsAreSkipped() throws {
        let scalingLists: [[Int]?] = [
            [1, -2, 3] + Array(repeating: 0, count: 13),  // full 4x4 list
            nil,
            [-8],  // nextScale 0 at once: useDefaultScalingMatrixFlag
            [4, 4, -16],  // 8 + 4 + 4 - 16 = 0: the list ends after three deltas
            nil, nil,
            Array(repeating: 1, count: 64),  // full 8x8 list
            [-8],
        ]
        let sps = try SPSBuilder(scalingLists: scalingLists, widthInMbs: 22, heightInMapUnits: 18).parsed()
        #expect(sps.seqScalingMatrixPresent)
        #expect(sps.displayWidth == 352 && sps.displayHeight == 288)
        #expect(sps.pocType == 0)
    }

    @Test func twelveScalingListsFor444() throws {
        let builder = SPSBuilder(
            profileIdc: 244, chromaFormatIdc: 3,
            scalingLists: Array(repeating: nil, count: 6) + Array(repeating: [2, -2] + Array(repeating: 0, count: 62), count: 6),
            widthInMbs: 40, heightInMapUnits: 30)
        let sps = try builder.parsed()
        #expect(sps.chromaFormatIdc == 3 && !sps.separateColourPlane)
        #expect(sps.codedWidth == 640 && sps.codedHeight == 480)
        // With only eight lists read, the rest of the SPS would be misparsed.
        var eightOnly = builder
        eightOnly.scalingLists = Array(eightOnly.scalingLists!.prefix(8))
        #expect((try? eightOnly.parsed())?.codedWidth != 640)
    }

    @Test func outOfRangeScalingDeltaIsInvalid() {
        let builder = SPSBuilder(scalingLists: [[200]] + Array(repeating: nil, count: 7))
        #expect(throws: BitstreamError.self) { try builder.parsed() }
    }

    @Test func bitDepthsAndChromaFormats() throws {
        var builder = SPSBuilder()
        builder.profileIdc = 110
        builder.bitDepthLuma = 10
        builder.bitDepthChroma = 9
        var sps = try builder.parsed()
        #expect(sps.bitDepthLuma == 10 && sps.bitDepthChroma == 9)
        builder.profileIdc = 122
        builder.chromaFormatIdc = 2
        sps = try builder.parsed()
        #expect(sps.chromaFormatIdc == 2 && sps.chromaArrayType == 2)
        builder.profileIdc = 244
        builder.chromaFormatIdc = 3
        builder.separateColourPlane = true
        sps = try builder.parsed()
        #expect(sps.separateColourPlane && sps.chromaArrayType == 0)
        builder.bitDepthLuma = 15
        #expect(throws: BitstreamError.self) { try builder.parsed() }
    }

    @Test func pocTypeOneAndTwo() throws {
        var builder = SPSBuilder()
        builder.pocType = 1
        builder.offsetForNonRefPic = -3
        builder.offsetForTopToBottomField = 2
        builder.offsetsForRefFrame = [5, -7, 0, 1000]
        builder.maxNumRefFrames = 3
        var sps = try builder.parsed()
        #expect(sps.picOrderCount == .type1(
            deltaPicOrderAlwaysZero: false, offsetForNonRefPic: -3, offsetForTopToBottomField: 2,
            offsetForRefFrame: [5, -7, 0, 1000]))
        #expect(sps.maxNumRefFrames == 3)
        #expect(sps.codedWidth == 320)
        builder.pocType = 2
        sps = try builder.parsed()
        #expect(sps.picOrderCount == .type2)
        #expect(sps.codedWidth == 320)
        builder.pocType = 3
        #expect(throws: BitstreamError.self) { try builder.parsed() }
    }

    @Test func interlacedSizes() throws {
        let sps = try SPSBuilder(widthInMbs: 45, heightInMapUnits: 18, frameMbsOnly: false, mbaff: true, crop: (0, 0, 0, 0)).parsed()
        #expect(!sps.frameMbsOnly && sps.mbAdaptiveFrameField)
        #expect(sps.codedWidth == 720 && sps.codedHeight == 576)
    }

    /// CropUnitX/CropUnitY from Table 6-1 and equations 7-19...7-22.
    @Test(arguments: [
        // chroma, separate planes, frame_mbs_only, expected crop units
        (1, false, true, 2, 2), (1, false, false, 2, 4), (2, false, true, 2, 1), (2, false, false, 2, 2),
        (3, false, true, 1, 1), (3, false, false, 1, 2), (0, false, true, 1, 1), (0, false, false, 1, 2),
        (3, true, true, 1, 1), (3, true, false, 1, 2),
    ])
    func cropUnits(chroma: Int, separate: Bool, frameMbsOnly: Bool, unitX: Int, unitY: Int) throws {
        let sps = try SPSBuilder(
            profileIdc: 244, chromaFormatIdc: chroma, separateColourPlane: separate, widthInMbs: 20, heightInMapUnits: 10,
            frameMbsOnly: frameMbsOnly, crop: (1, 2, 3, 1)
        ).parsed()
        #expect(sps.cropUnit.x == unitX && sps.cropUnit.y == unitY)
        let codedHeight = frameMbsOnly ? 160 : 320
        #expect(sps.displayWidth == 320 - 3 * unitX)
        #expect(sps.displayHeight == codedHeight - 4 * unitY)
        #expect(sps.cropRect.x == unitX && sps.cropRect.y == 3 * unitY)
    }

    @Test func croppingThatLeavesNothingIsIgnored() throws {
        let sps = try SPSBuilder(crop: (100, 100, 0, 0)).parsed()
        #expect(sps.displayWidth == 320 && sps.displayHeight == 240)
    }

    @Test func fullVUI() throws {
        var builder = SPSBuilder()
        builder.vui = { w in
            w.flag(true)
            w.u(8, 255)  // Extended_SAR
            w.u(16, 64)
            w.u(16, 45)
            w.flag(true)
            w.flag(true)  // overscan_appropriate
            w.flag(true)
            w.u(3, 2)  // video_format
            w.flag(true)  // full range
            w.flag(true)
            w.u(8, 9)
            w.u(8, 16)
            w.u(8, 9)
            w.flag(true)
            w.ue(1)
            w.ue(2)
            w.flag(true)
            w.u(32, 1001)
            w.u(32, 60000)
            w.flag(true)
            for _ in 0..<2 {  // NAL and VCL HRD, two CPBs each
                w.flag(true)
                w.ue(1)
                w.u(4, 2)
                w.u(4, 3)
                for _ in 0..<2 {
                    w.ue(12345)
                    w.ue(99999)
                    w.flag(true)
                }
                w.u(5, 23)
                w.u(5, 23)
                w.u(5, 23)
                w.u(5, 24)
            }
            w.flag(true)  // low_delay_hrd
            w.flag(true)  // pic_struct_present
            w.flag(true)
            w.flag(true)
            w.ue(2)
            w.ue(1)
            w.ue(16)
            w.ue(16)
            w.ue(2)
            w.ue(4)
        }
        let sps = try builder.parsed()
        let vui = try #require(sps.vui)
        #expect(vui.aspectRatioIdc == 255)
        #expect(vui.sampleAspectRatio == .init(width: 64, height: 45))
        #expect(vui.overscanAppropriate == true)
        #expect(vui.videoFormat == 2 && vui.videoFullRange)
        #expect(vui.colourPrimaries == 9 && vui.transferCharacteristics == 16 && vui.matrixCoefficients == 9)
        #expect(vui.chromaSampleLocTypeTopField == 1 && vui.chromaSampleLocTypeBottomField == 2)
        #expect(vui.numUnitsInTick == 1001 && vui.timeScale == 60000 && vui.fixedFrameRate)
        #expect(abs(vui.frameRate! - 29.97002997) < 1e-6)
        #expect(vui.nalHRD?.cpbs.count == 2 && vui.vclHRD?.cpbs.count == 2)
        #expect(vui.nalHRD?.cpbRemovalDelayLength == 24 && vui.nalHRD?.timeOffsetLength == 24)
        #expect(vui.nalHRD?.bitRate == 12346 << 8)
        #expect(vui.lowDelayHRD && vui.picStructPresent)
        #expect(vui.maxNumReorderFrames == 2 && vui.maxDecFrameBuffering == 4)

        let format = StreamFormat(sps: sps)
        #expect(format.sampleAspectRatio == "64:45")
        #expect(format.fullRange)
        #expect(format.colorPrimaries == "bt2020" && format.transfer == "smpte2084" && format.matrix == "bt2020nc")
        #expect(abs(format.frameRate! - 29.97002997) < 1e-6)
    }

    /// An SPS whose VUI holds only aspect_ratio_idc (an idc of 255, extended SAR, would need more).
    static func sps(aspectRatioIdc idc: Int) throws -> SequenceParameterSet {
        var builder = SPSBuilder()
        builder.vui = { w in
            w.flag(true)
            w.u(8, idc)
            for _ in 0..<8 { w.flag(false) }
        }
        return try builder.parsed()
    }

    @Test(arguments: [
        (1, "1:1"), (2, "12:11"), (3, "10:11"), (4, "16:11"), (5, "40:33"), (6, "24:11"), (7, "20:11"), (8, "32:11"),
        (9, "80:33"), (10, "18:11"), (11, "15:11"), (12, "64:33"), (13, "160:99"), (14, "4:3"), (15, "3:2"), (16, "2:1"),
    ])
    func aspectRatioTable(idc: Int, ratio: String) throws {
        let sps = try Self.sps(aspectRatioIdc: idc)
        #expect(sps.vui?.sampleAspectRatio?.text == ratio)
        #expect(sps.vui?.aspectRatioIdc == idc)
    }

    @Test func unspecifiedAndReservedAspectRatios() throws {
        for idc in [0, 17, 254] {
            let sps = try Self.sps(aspectRatioIdc: idc)
            #expect(sps.vui != nil)
            #expect(sps.vui?.sampleAspectRatio == nil)
            #expect(StreamFormat(sps: sps).sampleAspectRatio == nil)
        }
    }

    @Test func timingOnlyVUIGivesFrameRate() throws {
        var builder = SPSBuilder()
        builder.vui = { w in
            for _ in 0..<4 { w.flag(false) }
            w.flag(true)
            w.u(32, 1)
            w.u(32, 50)
            w.flag(false)
            for _ in 0..<4 { w.flag(false) }
        }
        let sps = try builder.parsed()
        #expect(sps.vui?.frameRate == 25)
        let format = StreamFormat(sps: sps)
        #expect(format.frameRate == 25)
        #expect(format.colorPrimaries == "unspecified" && !format.fullRange)
    }

    @Test func truncatedVUIKeepsTheSPS() throws {
        var builder = SPSBuilder()
        builder.crop = (0, 0, 0, 4)
        builder.widthInMbs = 120
        builder.heightInMapUnits = 68
        builder.vui = { w in
            for _ in 0..<4 { w.flag(false) }
            w.flag(true)
            w.u(16, 1)  // num_units_in_tick cut short
        }
        // Without trailing bits, as a broken camera would send it.
        let nal = NALUnit(bytes: [0x67] + RBSP.escape(builder.writer.bytes))
        let sps = try SequenceParameterSet(nal: nal)
        #expect(sps.vui == nil && sps.vuiMalformed)
        #expect(sps.displayWidth == 1920 && sps.displayHeight == 1080)
    }

    @Test func truncatedEssentialFieldsThrow() {
        let bytes = SPSBuilder().writer.bytes
        #expect(throws: BitstreamError.self) { try SequenceParameterSet(rbsp: Array(bytes.prefix(4))) }
        #expect(throws: BitstreamError.self) { try SequenceParameterSet(rbsp: []) }
        #expect(throws: BitstreamError.self) { try SequenceParameterSet(nal: NALUnit(bytes: [0x68, 0xCE])) }
    }

    @Test func colourNames() {
        #expect(ColourDescription.primariesName(1) == "bt709")
        #expect(ColourDescription.primariesName(5) == "bt470bg")
        #expect(ColourDescription.primariesName(6) == "smpte170m")
        #expect(ColourDescription.primariesName(9) == "bt2020")
        #expect(ColourDescription.primariesName(2) == "unspecified")
        #expect(ColourDescription.primariesName(3) == "reserved")
        #expect(ColourDescription.transferName(1) == "bt709")
        #expect(ColourDescription.transferName(13) == "iec61966-2-1")
        #expect(ColourDescription.transferName(18) == "arib-std-b67")
        #expect(ColourDescription.matrixName(0) == "gbr")
        #expect(ColourDescription.matrixName(5) == "bt470bg")
        #expect(ColourDescription.matrixName(6) == "smpte170m")
        #expect(ColourDescription.matrixName(200) == "reserved")
    }
}
