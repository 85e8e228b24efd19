import VideoCoding

extension SEIMessage {
    public static func messages(in nal: NALUnit) throws(BitstreamError) -> [SEIMessage] {
        guard nal.type == .sei else {
            throw BitstreamError(.invalidData, "NAL unit type \(nal.type.name) is not an SEI")
        }
        return try messages(inRBSP: nal.rbsp())
    }
}

/// recovery_point SEI (§D.1.8 / D.2.8): decoding can start here and pictures become correct
/// after `recoveryFrameCount` frames. Streams without IDR pictures (periodic intra refresh,
/// many cameras) mark their entry points with it.
public struct RecoveryPoint: Sendable, Equatable {
    public var recoveryFrameCount: Int
    public var exactMatch: Bool
    public var brokenLink: Bool
    public var changingSliceGroupIdc: Int

    public init(payload: [UInt8]) throws(BitstreamError) {
        var reader = BitReader(payload)
        recoveryFrameCount = try reader.readUE(max: 65535, "recovery_frame_cnt")
        exactMatch = try reader.readFlag()
        brokenLink = try reader.readFlag()
        changingSliceGroupIdc = Int(try reader.readBits(2))
    }
}
