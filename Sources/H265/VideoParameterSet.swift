import VideoCoding

/// A video parameter set (§7.3.2.1), read far enough to know it by id and what it says of the
/// layers, sub-layers, profile and timing. HRD parameters and extensions are not read.
public struct VideoParameterSet: Sendable, Equatable {
    public var id: Int
    public var baseLayerInternal: Bool
    public var baseLayerAvailable: Bool
    /// vps_max_layers_minus1 + 1.
    public var maxLayers: Int
    /// vps_max_sub_layers_minus1 + 1 (1...7).
    public var maxSubLayers: Int
    public var temporalIdNesting: Bool
    public var profileTierLevel: ProfileTierLevel
    /// One entry per sub-layer, sub-layer 0 first (when only the highest is coded, every
    /// sub-layer has its values).
    public var subLayerOrdering: [SubLayerOrdering]
    public var maxLayerId: Int
    /// vps_num_layer_sets_minus1 + 1.
    public var numLayerSets: Int
    /// vps_num_units_in_tick and vps_time_scale, when the VPS carries timing.
    public var numUnitsInTick: UInt32?
    public var timeScale: UInt32?

    /// Pictures per second from the timing, as in the VUI (one tick per picture).
    public var frameRate: Double? { TimingInfo.tickRate(numUnitsInTick: numUnitsInTick, timeScale: timeScale) }

    public init(nal: NALUnit) throws(BitstreamError) {
        try self.init(rbsp: nal.rbsp(of: .vps, "a VPS"))
    }

    /// `rbsp` starts after the two header bytes, emulation prevention removed.
    public init(rbsp: [UInt8]) throws(BitstreamError) {
        var reader = BitReader(rbsp)
        id = Int(try reader.readBits(4))
        baseLayerInternal = try reader.readFlag()
        baseLayerAvailable = try reader.readFlag()
        maxLayers = 1 + Int(try reader.readBits(6))
        let maxSubLayersMinus1 = Int(try reader.readBits(3))
        guard maxSubLayersMinus1 <= 6 else {
            throw BitstreamError(.invalidData, "vps_max_sub_layers_minus1 = \(maxSubLayersMinus1) is above its maximum 6")
        }
        maxSubLayers = maxSubLayersMinus1 + 1
        temporalIdNesting = try reader.readFlag()
        try reader.skipBits(16)  // vps_reserved_0xffff_16bits
        profileTierLevel = try ProfileTierLevel(reader: &reader, maxSubLayersMinus1: maxSubLayersMinus1)
        subLayerOrdering = try SubLayerOrdering.read(&reader, maxSubLayersMinus1: maxSubLayersMinus1)
        maxLayerId = Int(try reader.readBits(6))
        numLayerSets = 1 + (try reader.readUE(max: 1023, "vps_num_layer_sets_minus1"))
        // layer_id_included_flag[i][j] for every layer set after the first.
        try reader.skipBits((numLayerSets - 1) * (maxLayerId + 1))
        numUnitsInTick = nil
        timeScale = nil
        if try reader.readFlag() {
            numUnitsInTick = try reader.readBits(32)
            timeScale = try reader.readBits(32)
        }
    }
}

/// sps_max_dec_pic_buffering_minus1 + 1, sps_max_num_reorder_pics and
/// sps_max_latency_increase_plus1 of one temporal sub-layer (the VPS has the same triple).
public struct SubLayerOrdering: Sendable, Equatable {
    public var maxDecPicBuffering: Int
    public var maxNumReorderPics: Int
    public var maxLatencyIncreasePlus1: UInt32

    public init(maxDecPicBuffering: Int, maxNumReorderPics: Int, maxLatencyIncreasePlus1: UInt32) {
        self.maxDecPicBuffering = maxDecPicBuffering
        self.maxNumReorderPics = maxNumReorderPics
        self.maxLatencyIncreasePlus1 = maxLatencyIncreasePlus1
    }

    /// The loop of §7.3.2.1 and §7.3.2.2 after *_sub_layer_ordering_info_present_flag, with the
    /// entries it leaves out inferred: one per sub-layer, sub-layer 0 first.
    static func read(_ reader: inout BitReader, maxSubLayersMinus1: Int) throws(BitstreamError) -> [SubLayerOrdering] {
        let everySubLayer = try reader.readFlag()
        var entries: [SubLayerOrdering] = []
        for _ in (everySubLayer ? 0 : maxSubLayersMinus1)...maxSubLayersMinus1 {
            // MaxDpbSize is at most 16 (§A.4.2).
            let buffering = 1 + (try reader.readUE(max: 15, "max_dec_pic_buffering_minus1"))
            let reorder = try reader.readUE(max: 15, "max_num_reorder_pics")
            let latency = try reader.readUE()
            entries.append(
                SubLayerOrdering(maxDecPicBuffering: buffering, maxNumReorderPics: reorder, maxLatencyIncreasePlus1: latency))
        }
        if !everySubLayer {
            entries = Array(repeating: entries[0], count: maxSubLayersMinus1 + 1)
        }
        return entries
    }
}
