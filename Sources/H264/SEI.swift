import VideoCoding

/// One sei_message() (§7.3.2.3.1).
public struct SEIMessage: Sendable, Equatable {
    public var payloadType: Int
    /// The payload bytes (RBSP, emulation prevention already removed).
    public var payload: [UInt8]

    public init(payloadType: Int, payload: [UInt8]) {
        self.payloadType = payloadType
        self.payload = payload
    }

    public static let recoveryPointType = 6

    /// Splits an SEI RBSP into its messages. payloadType and payloadSize are coded as runs of
    /// 0xFF (each adding 255) ended by one byte below 0xFF. A payload that runs past the end throws.
    public static func messages(inRBSP rbsp: [UInt8]) throws(BitstreamError) -> [SEIMessage] {
        var messages: [SEIMessage] = []
        var offset = 0
        func readCodedValue() throws(BitstreamError) -> Int {
            var value = 0
            while true {
                guard offset < rbsp.count else {
                    throw BitstreamError(.invalidData, "SEI message header runs past the end of the NAL unit")
                }
                let byte = rbsp[offset]
                offset += 1
                value += Int(byte)
                if byte != 0xFF { return value }
            }
        }
        // What follows the last message is rbsp_trailing_bits: 0x80, maybe with zero bytes after.
        while offset < rbsp.count && !(rbsp[offset] == 0x80 && rbsp[(offset + 1)...].allSatisfy { $0 == 0 }) {
            let type = try readCodedValue()
            let size = try readCodedValue()
            guard size <= rbsp.count - offset else {
                throw BitstreamError(.invalidData, "SEI payload of type \(type) claims \(size) bytes, \(rbsp.count - offset) left")
            }
            messages.append(SEIMessage(payloadType: type, payload: Array(rbsp[offset..<(offset + size)])))
            offset += size
        }
        return messages
    }

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
