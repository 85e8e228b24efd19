import VideoCoding

/// A sequence parameter set (§7.3.2.1.1), with what the rest of FrameTap derives from it.
public struct SequenceParameterSet: Sendable, Equatable {
    public struct ConstraintFlags: Sendable, Equatable, Hashable {
        /// The byte after profile_idc: constraint_set0_flag is its top bit.
        public var byte: UInt8
        public init(byte: UInt8) { self.byte = byte }
        public var set0: Bool { byte & 0x80 != 0 }
        public var set1: Bool { byte & 0x40 != 0 }
        public var set2: Bool { byte & 0x20 != 0 }
        public var set3: Bool { byte & 0x10 != 0 }
        public var set4: Bool { byte & 0x08 != 0 }
        public var set5: Bool { byte & 0x04 != 0 }
    }

    public enum PicOrderCount: Sendable, Equatable {
        case type0(log2MaxPicOrderCntLsb: Int)
        case type1(
            deltaPicOrderAlwaysZero: Bool, offsetForNonRefPic: Int32, offsetForTopToBottomField: Int32,
            offsetForRefFrame: [Int32])
        case type2

        public var type: Int {
            switch self {
            case .type0: 0
            case .type1: 1
            case .type2: 2
            }
        }
    }

    /// Cropping offsets as coded, in crop units (§7.4.2.1.1), not luma samples.
    public typealias FrameCropping = EdgeOffsets

    public typealias Rect = PictureRect

    public var profileIdc: UInt8
    public var constraintFlags: ConstraintFlags
    public var levelIdc: UInt8
    public var id: Int
    public var chromaFormatIdc: Int
    public var separateColourPlane: Bool
    public var bitDepthLuma: Int
    public var bitDepthChroma: Int
    public var qpprimeYZeroTransformBypass: Bool
    public var seqScalingMatrixPresent: Bool
    public var log2MaxFrameNum: Int
    public var picOrderCount: PicOrderCount
    public var maxNumRefFrames: Int
    public var gapsInFrameNumAllowed: Bool
    public var picWidthInMbs: Int
    public var picHeightInMapUnits: Int
    public var frameMbsOnly: Bool
    public var mbAdaptiveFrameField: Bool
    public var direct8x8Inference: Bool
    public var frameCropping: FrameCropping?
    /// nil when absent, and also when present but malformed or truncated: the VUI is optional
    /// for decoding, and cameras with broken VUI must still play.
    public var vui: VUIParameters?
    /// True when the SPS announced a VUI that could not be parsed.
    public var vuiMalformed: Bool

    public init(nal: NALUnit) throws(BitstreamError) {
        try self.init(rbsp: nal.rbsp(of: .sps, "an SPS"))
    }

    /// `rbsp` starts after the NAL header byte, emulation prevention removed.
    public init(rbsp: [UInt8]) throws(BitstreamError) {
        var reader = BitReader(rbsp)
        profileIdc = UInt8(try reader.readBits(8))
        constraintFlags = ConstraintFlags(byte: UInt8(try reader.readBits(8)))
        levelIdc = UInt8(try reader.readBits(8))
        id = try reader.readUE(max: 31, "seq_parameter_set_id")

        chromaFormatIdc = 1
        separateColourPlane = false
        bitDepthLuma = 8
        bitDepthChroma = 8
        qpprimeYZeroTransformBypass = false
        seqScalingMatrixPresent = false
        if Self.profilesWithChromaInfo.contains(profileIdc) {
            chromaFormatIdc = try reader.readUE(max: 3, "chroma_format_idc")
            if chromaFormatIdc == 3 { separateColourPlane = try reader.readFlag() }
            bitDepthLuma = 8 + (try reader.readUE(max: 6, "bit_depth_luma_minus8"))
            bitDepthChroma = 8 + (try reader.readUE(max: 6, "bit_depth_chroma_minus8"))
            qpprimeYZeroTransformBypass = try reader.readFlag()
            seqScalingMatrixPresent = try reader.readFlag()
            if seqScalingMatrixPresent {
                let listCount = chromaFormatIdc == 3 ? 12 : 8
                for index in 0..<listCount {
                    if try reader.readFlag() { try ScalingList.skip(&reader, size: index < 6 ? 16 : 64) }
                }
            }
        }

        log2MaxFrameNum = 4 + (try reader.readUE(max: 12, "log2_max_frame_num_minus4"))
        switch try reader.readUE(max: 2, "pic_order_cnt_type") {
        case 0:
            picOrderCount = .type0(log2MaxPicOrderCntLsb: 4 + (try reader.readUE(max: 12, "log2_max_pic_order_cnt_lsb_minus4")))
        case 1:
            let alwaysZero = try reader.readFlag()
            let nonRef = try reader.readSE()
            let topToBottom = try reader.readSE()
            let cycle = try reader.readUE(max: 255, "num_ref_frames_in_pic_order_cnt_cycle")
            var offsets: [Int32] = []
            offsets.reserveCapacity(cycle)
            for _ in 0..<cycle { offsets.append(try reader.readSE()) }
            picOrderCount = .type1(
                deltaPicOrderAlwaysZero: alwaysZero, offsetForNonRefPic: nonRef,
                offsetForTopToBottomField: topToBottom, offsetForRefFrame: offsets)
        default:
            picOrderCount = .type2
        }
        // Annex A caps MaxDpbFrames at 16; SVC/MVC streams in the wild stay within it too.
        maxNumRefFrames = try reader.readUE(max: 16, "max_num_ref_frames")
        gapsInFrameNumAllowed = try reader.readFlag()
        // 2^16 macroblocks per side is far beyond any level; it keeps the arithmetic safe.
        picWidthInMbs = 1 + (try reader.readUE(max: 65535, "pic_width_in_mbs_minus1"))
        picHeightInMapUnits = 1 + (try reader.readUE(max: 65535, "pic_height_in_map_units_minus1"))
        frameMbsOnly = try reader.readFlag()
        mbAdaptiveFrameField = frameMbsOnly ? false : try reader.readFlag()
        direct8x8Inference = try reader.readFlag()
        if try reader.readFlag() {
            frameCropping = FrameCropping(
                left: try reader.readUE(max: 1 << 20, "frame_crop_left_offset"),
                right: try reader.readUE(max: 1 << 20, "frame_crop_right_offset"),
                top: try reader.readUE(max: 1 << 20, "frame_crop_top_offset"),
                bottom: try reader.readUE(max: 1 << 20, "frame_crop_bottom_offset"))
        } else {
            frameCropping = nil
        }

        (vui, vuiMalformed) = try reader.readOptionalVUI { reader throws(BitstreamError) in try VUIParameters(reader: &reader) }
    }

    /// Profiles whose SPS carries chroma_format_idc, bit depths and scaling matrices.
    static let profilesWithChromaInfo: Set<UInt8> = [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135]

    // MARK: - Derived values

    /// ChromaArrayType (§7.4.2.1.1): 0 for monochrome and for separately coded colour planes.
    public var chromaArrayType: Int { separateColourPlane ? 0 : chromaFormatIdc }

    public var pocType: Int { picOrderCount.type }

    public var frameHeightInMbs: Int { (frameMbsOnly ? 1 : 2) * picHeightInMapUnits }

    /// Decoded picture size in luma samples, before cropping.
    public var codedWidth: Int { picWidthInMbs * 16 }
    public var codedHeight: Int { frameHeightInMbs * 16 }

    /// CropUnitX and CropUnitY (equations 7-19...7-22).
    public var cropUnit: (x: Int, y: Int) {
        let fieldFactor = frameMbsOnly ? 1 : 2
        switch chromaArrayType {
        case 1: return (2, 2 * fieldFactor)
        case 2: return (2, fieldFactor)
        case 3: return (1, fieldFactor)
        default: return (1, fieldFactor)
        }
    }

    /// The visible part of the decoded picture in luma samples. A cropping window that leaves
    /// nothing is ignored, as decoders do.
    public var cropRect: Rect {
        let unit = cropUnit
        return Rect(codedWidth: codedWidth, codedHeight: codedHeight, crop: frameCropping, unitWidth: unit.x, unitHeight: unit.y)
    }

    public var displayWidth: Int { cropRect.width }
    public var displayHeight: Int { cropRect.height }

    /// True when a decoder can know the picture reorder delay from this SPS alone: the VUI
    /// states `max_num_reorder_frames`, or the profile has no B slices (Baseline) or only
    /// intra pictures (the Intra profiles, constraint_set3 with profile_idc 110/122/244/44).
    public var announcesReorderDelay: Bool {
        if vui?.maxNumReorderFrames != nil { return true }
        if profileIdc == 66 { return true }
        if profileIdc == 44 { return true }
        return [110, 122, 244].contains(profileIdc) && constraintFlags.set3
    }

    public var profileName: String {
        Self.profileName(profileIdc: profileIdc, constraints: constraintFlags)
    }

    public static func profileName(profileIdc: UInt8, constraints: ConstraintFlags) -> String {
        switch profileIdc {
        case 66: constraints.set1 ? "Constrained Baseline" : "Baseline"
        case 77: "Main"
        case 88: "Extended"
        case 100:
            if constraints.set4 && constraints.set5 {
                "Constrained High"
            } else if constraints.set4 {
                "Progressive High"
            } else {
                "High"
            }
        case 110: constraints.set3 ? "High 10 Intra" : (constraints.set4 ? "Progressive High 10" : "High 10")
        case 122: constraints.set3 ? "High 4:2:2 Intra" : "High 4:2:2"
        case 244: constraints.set3 ? "High 4:4:4 Intra" : "High 4:4:4 Predictive"
        case 44: "CAVLC 4:4:4 Intra"
        case 83: constraints.set5 ? "Scalable Constrained Baseline" : "Scalable Baseline"
        case 86:
            if constraints.set3 {
                "Scalable High Intra"
            } else if constraints.set5 {
                "Scalable Constrained High"
            } else {
                "Scalable High"
            }
        case 118: "Multiview High"
        case 128: "Stereo High"
        case 134: "MFC High"
        case 135: "MFC Depth High"
        case 138: "Multiview Depth High"
        case 139: "Enhanced Multiview Depth High"
        default: "Unknown (\(profileIdc))"
        }
    }

    /// Level number as in Table A-1: "1b", "1.1", "3", "3.1", "5.2"...
    public var levelName: String {
        // Level 1b: level_idc 11 + constraint_set3 in Baseline/Main/Extended, level_idc 9 elsewhere.
        if levelIdc == 9 || (levelIdc == 11 && constraintFlags.set3 && [66, 77, 88].contains(profileIdc)) {
            return "1b"
        }
        let minor = levelIdc % 10
        return minor == 0 ? "\(levelIdc / 10)" : "\(levelIdc / 10).\(minor)"
    }
}

/// scaling_list() (§7.3.2.1.1.1). FrameTap hands decoding to libavcodec, so the values are only
/// walked over; getting their length right is what matters.
enum ScalingList {
    static func skip(_ reader: inout BitReader, size: Int) throws(BitstreamError) {
        var lastScale = 8
        var nextScale = 8
        for _ in 0..<size {
            if nextScale != 0 {
                let delta = try reader.readSE(in: -128...127, "delta_scale")
                nextScale = (lastScale + delta + 256) % 256
            }
            // nextScale == 0 ends the coded list (the rest repeats lastScale or uses the default).
            if nextScale == 0 { return }
            lastScale = nextScale
        }
    }
}
