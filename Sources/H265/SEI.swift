import VideoCoding

extension SEIMessage {
    /// The messages of a prefix or suffix SEI unit.
    public static func messages(in nal: NALUnit) throws(BitstreamError) -> [SEIMessage] {
        guard nal.type == .prefixSEI || nal.type == .suffixSEI else {
            throw BitstreamError(.invalidData, "NAL unit type \(nal.type.name) is not an SEI")
        }
        return try messages(inRBSP: nal.rbsp())
    }
}

/// recovery_point SEI (§D.2.8, §D.3.8), in a prefix SEI of the access unit it marks: decoding
/// can start at this picture, and the pictures from picture order count `recoveryPOCCount` after
/// it on, in output order, are correct (or nearly, without `exactMatch`). Streams without IRAP
/// pictures (intra refresh, a non-IRAP intra picture) mark their entry points with it.
public struct RecoveryPoint: Sendable, Equatable {
    public var recoveryPOCCount: Int
    public var exactMatch: Bool
    public var brokenLink: Bool

    public init(payload: [UInt8]) throws(BitstreamError) {
        var reader = BitReader(payload)
        // -MaxPicOrderCntLsb / 2 ... MaxPicOrderCntLsb / 2 - 1, and MaxPicOrderCntLsb is at most 2^16.
        recoveryPOCCount = try reader.readSE(in: -32768...32767, "recovery_poc_cnt")
        exactMatch = try reader.readFlag()
        brokenLink = try reader.readFlag()
    }

    /// The first recovery point among the prefix SEI units of `unit`'s base layer; nil when
    /// there is none or none could be read (a decoder then cannot start there either).
    public init?(in unit: AccessUnit) {
        for nal in unit.nalUnits where nal.type == .prefixSEI && nal.layerId == 0 {
            guard let payload = try? SEIMessage.payload(ofType: SEIMessage.recoveryPointType, inRBSP: nal.rbsp()),
                let point = try? RecoveryPoint(payload: payload)
            else { continue }
            self = point
            return
        }
        return nil
    }
}
