import VideoCoding

/// One st_ref_pic_set() of an SPS (§7.3.7, semantics §7.4.8): the pictures before and after
/// the current one, by POC difference, that it keeps for reference.
public struct ShortTermReferencePictureSet: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        /// The POC difference to the current picture.
        public var deltaPoc: Int
        /// Used for reference by the current picture (not only kept for later ones).
        public var usedByCurrentPicture: Bool

        public init(deltaPoc: Int, usedByCurrentPicture: Bool) {
            self.deltaPoc = deltaPoc
            self.usedByCurrentPicture = usedByCurrentPicture
        }
    }

    /// DeltaPocS0 and UsedByCurrPicS0: negative differences, nearest first.
    public var negative: [Entry]
    /// DeltaPocS1 and UsedByCurrPicS1: positive differences, nearest first.
    public var positive: [Entry]
    /// Coded as a prediction from the set before it.
    public var predicted: Bool

    public init(negative: [Entry], positive: [Entry], predicted: Bool = false) {
        self.negative = negative
        self.positive = positive
        self.predicted = predicted
    }

    /// NumDeltaPocs.
    public var count: Int { negative.count + positive.count }

    /// libavcodec keeps at most this many pictures in one set; more is refused.
    static let maxPicturesPerDirection = 16
    static let maxDeltaPocs = 32

    /// Reads the set that follows `previous` in the SPS (the first set has none): with
    /// inter_ref_pic_set_prediction_flag it is derived from `previous` (equations 7-61, 7-62).
    init(reader: inout BitReader, previous: ShortTermReferencePictureSet?) throws(BitstreamError) {
        predicted = previous != nil ? try reader.readFlag() : false
        guard predicted, let reference = previous else {
            let negativeCount = try reader.readUE(max: Self.maxPicturesPerDirection - 1, "num_negative_pics")
            let positiveCount = try reader.readUE(max: Self.maxPicturesPerDirection - 1, "num_positive_pics")
            negative = []
            positive = []
            var poc = 0
            for _ in 0..<negativeCount {
                poc -= 1 + (try reader.readUE(max: (1 << 15) - 1, "delta_poc_s0_minus1"))
                negative.append(Entry(deltaPoc: poc, usedByCurrentPicture: try reader.readFlag()))
            }
            poc = 0
            for _ in 0..<positiveCount {
                poc += 1 + (try reader.readUE(max: (1 << 15) - 1, "delta_poc_s1_minus1"))
                positive.append(Entry(deltaPoc: poc, usedByCurrentPicture: try reader.readFlag()))
            }
            return
        }
        let negativeSign = try reader.readFlag()
        let magnitude = 1 + (try reader.readUE(max: (1 << 15) - 1, "abs_delta_rps_minus1"))
        let deltaRps = negativeSign ? -magnitude : magnitude
        // One (used_by_curr_pic_flag, use_delta_flag) pair per picture of the reference set, its
        // negative ones first, then one for the reference picture itself (deltaRps).
        var flags: [(used: Bool, useDelta: Bool)] = []
        for _ in 0...reference.count {
            let used = try reader.readFlag()
            flags.append((used, used ? true : try reader.readFlag()))
        }
        let ownFlags = flags[reference.count]
        let referenceNegative = reference.negative.count
        negative = []
        for (index, entry) in reference.positive.enumerated().reversed() {
            let delta = entry.deltaPoc + deltaRps
            let flag = flags[referenceNegative + index]
            if delta < 0 && flag.useDelta { negative.append(Entry(deltaPoc: delta, usedByCurrentPicture: flag.used)) }
        }
        if deltaRps < 0 && ownFlags.useDelta {
            negative.append(Entry(deltaPoc: deltaRps, usedByCurrentPicture: ownFlags.used))
        }
        for (index, entry) in reference.negative.enumerated() {
            let delta = entry.deltaPoc + deltaRps
            if delta < 0 && flags[index].useDelta {
                negative.append(Entry(deltaPoc: delta, usedByCurrentPicture: flags[index].used))
            }
        }
        positive = []
        for (index, entry) in reference.negative.enumerated().reversed() {
            let delta = entry.deltaPoc + deltaRps
            if delta > 0 && flags[index].useDelta {
                positive.append(Entry(deltaPoc: delta, usedByCurrentPicture: flags[index].used))
            }
        }
        if deltaRps > 0 && ownFlags.useDelta {
            positive.append(Entry(deltaPoc: deltaRps, usedByCurrentPicture: ownFlags.used))
        }
        for (index, entry) in reference.positive.enumerated() {
            let delta = entry.deltaPoc + deltaRps
            let flag = flags[referenceNegative + index]
            if delta > 0 && flag.useDelta { positive.append(Entry(deltaPoc: delta, usedByCurrentPicture: flag.used)) }
        }
        guard count < Self.maxDeltaPocs else {
            throw BitstreamError(.invalidData, "a predicted short-term reference picture set holds \(count) pictures")
        }
    }
}
