/// Edits of real H.265 Annex B streams for the decoder and session tests: an SPS with other
/// sizes, bit depths or chroma format (everything after them kept bit for bit, so the rest of
/// the stream still fits it), and copies of units moved to a layer above the base. Self-contained
/// (no codec module): what is read is only the SPS's head.
public enum HEVCEdits {
    /// What to change in every SPS; nil keeps the field.
    public struct SPSChange: Sendable {
        public var chromaFormatIdc: Int?
        public var width: Int?
        public var height: Int?
        public var bitDepthLuma: Int?
        public var bitDepthChroma: Int?

        public init(
            chromaFormatIdc: Int? = nil, width: Int? = nil, height: Int? = nil, bitDepthLuma: Int? = nil,
            bitDepthChroma: Int? = nil
        ) {
            self.chromaFormatIdc = chromaFormatIdc
            self.width = width
            self.height = height
            self.bitDepthLuma = bitDepthLuma
            self.bitDepthChroma = bitDepthChroma
        }
    }

    /// The NAL units of an Annex B stream (between start codes, trailing zeros removed).
    public static func units(_ stream: [UInt8]) -> [[UInt8]] {
        let starts = annexBUnitStarts(stream)
        return starts.indices.map { number in
            let end = number + 1 < starts.count ? starts[number + 1] - 3 : stream.count
            var unit = Array(stream[starts[number]..<end])
            while unit.last == 0 { unit.removeLast() }
            return unit
        }
    }

    /// The units joined with four-byte start codes.
    public static func stream(_ units: [[UInt8]]) -> [UInt8] {
        units.flatMap { [0, 0, 0, 1] + $0 }
    }

    /// nal_unit_type of a unit.
    public static func type(_ unit: [UInt8]) -> Int { Int(unit[0] >> 1) & 0x3F }

    /// A prefix SEI unit holding one recovery_point message (§D.2.8) with this
    /// recovery_poc_cnt (0...15) and exact_match_flag 1.
    public static func recoveryPointSEI(pocCount: Int) -> [UInt8] {
        precondition((0...15).contains(pocCount))
        // se(v) of a positive count k is ue(2k - 1); then exact_match_flag 1, broken_link_flag 0,
        // and the payload's alignment (a 1, then 0s); then rbsp_trailing_bits.
        let code = pocCount == 0 ? 0 : 2 * pocCount - 1
        let length = Int.bitWidth - (code + 1).leadingZeroBitCount
        var bits = Array(repeating: false, count: length - 1) + (0..<length).reversed().map { (code + 1) >> $0 & 1 == 1 }
        bits += [true, false, true]
        while bits.count % 8 != 0 { bits.append(false) }
        let payload = stride(from: 0, to: bits.count, by: 8).map { start in
            bits[start..<(start + 8)].reduce(UInt8(0)) { $0 << 1 | ($1 ? 1 : 0) }
        }
        return [0x4E, 0x01, 6, UInt8(payload.count)] + payload + [0x80]
    }

    /// `stream` joined at its picture `firstPicture` (its VPS, SPS and PPS kept in front), with a
    /// recovery point SEI of `pocCount` in front of every picture whose number is a multiple of
    /// `every` (counted in the whole stream): a stream without IRAP pictures that marks where
    /// decoding can start, as a camera joined mid-stream.
    public static func joinedAtRecoveryPoints(_ stream: [UInt8], firstPicture: Int, every: Int, pocCount: Int) -> [UInt8] {
        let all = units(stream)
        let parameterSets = all.filter { (32...34).contains(type($0)) }
        var joined = parameterSets
        var picture = -1
        for unit in all where type(unit) < 32 {
            // A picture's first slice segment has first_slice_segment_in_pic_flag set.
            if unit.count > 2 && unit[2] & 0x80 != 0 { picture += 1 }
            guard picture >= firstPicture else { continue }
            if picture % every == 0 && unit[2] & 0x80 != 0 { joined.append(recoveryPointSEI(pocCount: pocCount)) }
            joined.append(unit)
        }
        return self.stream(joined)
    }

    /// `stream` with every SPS changed.
    public static func changingSPS(_ stream: [UInt8], _ change: SPSChange) -> [UInt8] {
        self.stream(units(stream).map { type($0) == 33 ? changing($0, change) : $0 })
    }

    /// `unit` (header and escaped payload) moved to layer `layerId`, its type and temporal id kept.
    public static func onLayer(_ unit: [UInt8], _ layerId: Int) -> [UInt8] {
        var moved = unit
        moved[0] = unit[0] & 0xFE | UInt8(layerId >> 5)
        moved[1] = UInt8(layerId & 0x1F) << 3 | unit[1] & 7
        return moved
    }

    /// One SPS (header and escaped payload), changed.
    static func changing(_ sps: [UInt8], _ change: SPSChange) -> [UInt8] {
        var reader = Reader(unescape(Array(sps[2...])))
        var writer = BitWriter()
        writer.u(4, reader.u(4))  // sps_video_parameter_set_id
        let maxSubLayersMinus1 = reader.u(3)
        writer.u(3, maxSubLayersMinus1)
        writer.u(1, reader.u(1))
        // profile_tier_level: the general part, then the sub-layers' present flags and parts.
        writer.u(48, reader.u(48))
        writer.u(48, reader.u(48))
        var present: [(profile: Int, level: Int)] = []
        for _ in 0..<maxSubLayersMinus1 { present.append((reader.u(1), reader.u(1))) }
        for flags in present {
            writer.u(1, flags.profile)
            writer.u(1, flags.level)
        }
        if maxSubLayersMinus1 > 0 { writer.u(2 * (8 - maxSubLayersMinus1), reader.u(2 * (8 - maxSubLayersMinus1))) }
        for flags in present {
            if flags.profile == 1 {
                writer.u(44, reader.u(44))
                writer.u(44, reader.u(44))
            }
            if flags.level == 1 { writer.u(8, reader.u(8)) }
        }
        writer.ue(reader.ue())  // sps_seq_parameter_set_id
        let chroma = reader.ue()
        let newChroma = change.chromaFormatIdc ?? chroma
        writer.ue(newChroma)
        let separateColourPlanes = chroma == 3 ? reader.u(1) : 0
        if newChroma == 3 { writer.u(1, separateColourPlanes) }
        let width = reader.ue()
        let height = reader.ue()
        writer.ue(change.width ?? width)
        writer.ue(change.height ?? height)
        let window = reader.u(1)
        writer.u(1, window)
        for _ in 0..<(4 * window) { writer.ue(reader.ue()) }
        let luma = reader.ue() + 8
        let chromaDepth = reader.ue() + 8
        writer.ue((change.bitDepthLuma ?? luma) - 8)
        writer.ue((change.bitDepthChroma ?? change.bitDepthLuma ?? chromaDepth) - 8)
        // The rest up to the stop bit, as it was.
        for bit in reader.restBeforeStopBit() { writer.bit(bit) }
        writer.trailingBits()
        return Array(sps[..<2]) + escape(writer.bytes)
    }

    static func unescape(_ payload: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        var zeros = 0
        for byte in payload {
            if zeros >= 2 && byte == 3 {
                zeros = 0
                continue
            }
            output.append(byte)
            zeros = byte == 0 ? zeros + 1 : 0
        }
        return output
    }

    static func escape(_ rbsp: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        var zeros = 0
        for byte in rbsp {
            if zeros >= 2 && byte <= 3 {
                output.append(3)
                zeros = 0
            }
            output.append(byte)
            zeros = byte == 0 ? zeros + 1 : 0
        }
        return output
    }

    /// Reads u(n) and ue(v) from an RBSP; reading past the end gives zeros (the edits only read
    /// SPS heads of real streams).
    struct Reader {
        let bits: [Bool]
        var position = 0

        init(_ bytes: [UInt8]) {
            bits = bytes.flatMap { byte in (0..<8).map { byte & (0x80 >> $0) != 0 } }
        }

        mutating func u(_ count: Int) -> Int {
            var value = 0
            for _ in 0..<count {
                value = value << 1 | (position < bits.count && bits[position] ? 1 : 0)
                position += 1
            }
            return value
        }

        mutating func ue() -> Int {
            var zeros = 0
            while position < bits.count, !bits[position] {
                zeros += 1
                position += 1
            }
            position += 1
            return (1 << zeros) - 1 + u(zeros)
        }

        /// The bits after `position` up to the rbsp_stop_one_bit, which is the last one bit.
        func restBeforeStopBit() -> ArraySlice<Bool> {
            guard let stop = bits.lastIndex(of: true), stop >= position else { return [] }
            return bits[position..<stop]
        }
    }
}
