import VideoCoding

/// profile_tier_level() (§7.3.3) as the VPS and SPS carry it: the general profile, tier and
/// level. The sub-layers' entries are walked over.
public struct ProfileTierLevel: Sendable, Equatable {
    /// general_profile_space: 0 in every stream this edition defines.
    public var profileSpace: Int
    public var highTier: Bool
    /// general_profile_idc as coded (0 in streams that only set compatibility flags).
    public var profileIdc: Int
    /// general_profile_compatibility_flag[j] is bit 31 - j (flag 0 is the top bit).
    public var compatibilityFlags: UInt32
    /// The 48 bits from general_progressive_source_flag to general_inbld_flag, first bit highest.
    public var constraintFlags: UInt64
    public var levelIdc: Int

    public init(
        profileSpace: Int = 0, highTier: Bool = false, profileIdc: Int, compatibilityFlags: UInt32 = 0,
        constraintFlags: UInt64 = 0, levelIdc: Int
    ) {
        self.profileSpace = profileSpace
        self.highTier = highTier
        self.profileIdc = profileIdc
        self.compatibilityFlags = compatibilityFlags
        self.constraintFlags = constraintFlags
        self.levelIdc = levelIdc
    }

    /// Reads profile_tier_level(1, maxSubLayersMinus1).
    public init(reader: inout BitReader, maxSubLayersMinus1: Int) throws(BitstreamError) {
        profileSpace = Int(try reader.readBits(2))
        highTier = try reader.readFlag()
        profileIdc = Int(try reader.readBits(5))
        compatibilityFlags = try reader.readBits(32)
        constraintFlags = UInt64(try reader.readBits(16)) << 32 | UInt64(try reader.readBits(32))
        levelIdc = Int(try reader.readBits(8))
        var subLayerProfilePresent: [Bool] = []
        var subLayerLevelPresent: [Bool] = []
        for _ in 0..<maxSubLayersMinus1 {
            subLayerProfilePresent.append(try reader.readFlag())
            subLayerLevelPresent.append(try reader.readFlag())
        }
        // reserved_zero_2bits up to eight entries.
        if maxSubLayersMinus1 > 0 { try reader.skipBits(2 * (8 - maxSubLayersMinus1)) }
        for index in 0..<maxSubLayersMinus1 {
            // sub_layer_profile_space to sub_layer_inbld_flag: 88 bits, as in the general part.
            if subLayerProfilePresent[index] { try reader.skipBits(88) }
            if subLayerLevelPresent[index] { try reader.skipBits(8) }
        }
    }

    public func isCompatible(with profileIdc: Int) -> Bool {
        (0..<32).contains(profileIdc) && compatibilityFlags & (UInt32(1) << UInt32(31 - profileIdc)) != 0
    }

    /// The profile a decoder takes the stream for: general_profile_idc, or when that is 0 the
    /// lowest profile the compatibility flags claim (as libavcodec does).
    public var effectiveProfileIdc: Int {
        if profileIdc != 0 { return profileIdc }
        return (1..<32).first { isCompatible(with: $0) } ?? 0
    }

    private func constraint(_ bit: Int) -> Bool { constraintFlags & (UInt64(1) << UInt64(47 - bit)) != 0 }

    public var progressiveSource: Bool { constraint(0) }
    public var interlacedSource: Bool { constraint(1) }
    public var nonPackedConstraint: Bool { constraint(2) }
    public var frameOnlyConstraint: Bool { constraint(3) }

    /// The format range extensions' constraint flags (§7.4.4), which say which of the RExt,
    /// high throughput, scalable and screen content profiles a stream is; nil for profiles whose
    /// 43 bits after general_frame_only_constraint_flag mean something else.
    public var rangeExtensionConstraints: RangeExtensionConstraints? {
        guard (4...11).contains(effectiveProfileIdc) || (4...11).contains(where: isCompatible(with:)) else { return nil }
        return RangeExtensionConstraints(
            max12Bit: constraint(4), max10Bit: constraint(5), max8Bit: constraint(6), max422Chroma: constraint(7),
            max420Chroma: constraint(8), maxMonochrome: constraint(9), intra: constraint(10),
            onePictureOnly: constraint(11), lowerBitRate: constraint(12))
    }

    public struct RangeExtensionConstraints: Sendable, Equatable, Hashable {
        public var max12Bit: Bool
        public var max10Bit: Bool
        public var max8Bit: Bool
        public var max422Chroma: Bool
        public var max420Chroma: Bool
        public var maxMonochrome: Bool
        public var intra: Bool
        public var onePictureOnly: Bool
        public var lowerBitRate: Bool
    }

    /// "Main", "Main 10", "Main Still Picture", and for the format range extensions the name of
    /// Table A.2 that the constraint flags select ("Main 4:2:2 10", "Main 4:4:4 Intra",
    /// "Monochrome 12"...); ffprobe calls all of those "Rext", which is what a combination
    /// outside the table gets. The later extensions (5...11) are named by family.
    public var profileName: String {
        switch effectiveProfileIdc {
        case 1: "Main"
        case 2: "Main 10"
        case 3: "Main Still Picture"
        case 4: rangeExtensionConstraints.flatMap { Self.rangeExtensionProfiles[Self.key($0)] } ?? "Rext"
        case 5: "High Throughput 4:4:4"
        case 6: "Multiview Main"
        case 7: "Scalable Main"
        case 8: "3D Main"
        case 9: "Screen-Extended Main"
        case 10: "Scalable Format Range Extensions"
        case 11: "High Throughput Screen-Extended"
        default: "Unknown (\(profileIdc))"
        }
    }

    /// "Main" or "High".
    public var tierName: String { highTier ? "High" : "Main" }

    /// "4.1" for general_level_idc 123: the level times 30 (§A.4).
    public var levelName: String {
        let major = levelIdc / 30
        let minor = levelIdc % 30 / 3
        return minor == 0 ? "\(major)" : "\(major).\(minor)"
    }

    /// The flags Table A.2 sets apart, lower_bit_rate_constraint_flag aside (it only separates
    /// the Intra profiles' bit rates).
    private static func key(_ flags: RangeExtensionConstraints) -> [Bool] {
        [flags.max12Bit, flags.max10Bit, flags.max8Bit, flags.max422Chroma, flags.max420Chroma, flags.maxMonochrome,
         flags.intra, flags.onePictureOnly]
    }

    /// Table A.2: max_12bit, max_10bit, max_8bit, max_422chroma, max_420chroma,
    /// max_monochrome, intra, one_picture_only.
    private static let rangeExtensionProfiles: [[Bool]: String] = {
        let rows: [(String, [Int])] = [
            ("Monochrome", [1, 1, 1, 1, 1, 1, 0, 0]),
            ("Monochrome 10", [1, 1, 0, 1, 1, 1, 0, 0]),
            ("Monochrome 12", [1, 0, 0, 1, 1, 1, 0, 0]),
            ("Monochrome 16", [0, 0, 0, 1, 1, 1, 0, 0]),
            ("Main 12", [1, 0, 0, 1, 1, 0, 0, 0]),
            ("Main 4:2:2 10", [1, 1, 0, 1, 0, 0, 0, 0]),
            ("Main 4:2:2 12", [1, 0, 0, 1, 0, 0, 0, 0]),
            ("Main 4:4:4", [1, 1, 1, 0, 0, 0, 0, 0]),
            ("Main 4:4:4 10", [1, 1, 0, 0, 0, 0, 0, 0]),
            ("Main 4:4:4 12", [1, 0, 0, 0, 0, 0, 0, 0]),
            ("Main Intra", [1, 1, 1, 1, 1, 0, 1, 0]),
            ("Main 10 Intra", [1, 1, 0, 1, 1, 0, 1, 0]),
            ("Main 12 Intra", [1, 0, 0, 1, 1, 0, 1, 0]),
            ("Main 4:2:2 10 Intra", [1, 1, 0, 1, 0, 0, 1, 0]),
            ("Main 4:2:2 12 Intra", [1, 0, 0, 1, 0, 0, 1, 0]),
            ("Main 4:4:4 Intra", [1, 1, 1, 0, 0, 0, 1, 0]),
            ("Main 4:4:4 10 Intra", [1, 1, 0, 0, 0, 0, 1, 0]),
            ("Main 4:4:4 12 Intra", [1, 0, 0, 0, 0, 0, 1, 0]),
            ("Main 4:4:4 16 Intra", [0, 0, 0, 0, 0, 0, 1, 0]),
            ("Main 4:4:4 Still Picture", [1, 1, 1, 0, 0, 0, 1, 1]),
            ("Main 4:4:4 16 Still Picture", [0, 0, 0, 0, 0, 0, 1, 1]),
        ]
        return Dictionary(uniqueKeysWithValues: rows.map { (row: (String, [Int])) in (row.1.map { $0 == 1 }, row.0) })
    }()
}
