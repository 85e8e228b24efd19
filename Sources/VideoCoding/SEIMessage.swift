/// One sei_message() (H.264 §7.3.2.3.1, H.265 §7.3.5: coded alike in both).
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
        try walk(rbsp) { type, payload in
            messages.append(SEIMessage(payloadType: type, payload: Array(rbsp[payload])))
            return true
        }
        return messages
    }

    /// The payload of the first message of `type`, nil when there is none; the other messages'
    /// payloads are not copied (an SEI unit on every picture costs no allocation for them).
    public static func payload(ofType type: Int, inRBSP rbsp: [UInt8]) throws(BitstreamError) -> [UInt8]? {
        var found: [UInt8]?
        try walk(rbsp) { messageType, payload in
            guard messageType == type else { return true }
            found = Array(rbsp[payload])
            return false
        }
        return found
    }

    /// Calls `body` with each message's type and payload range, while it returns true.
    private static func walk(
        _ rbsp: [UInt8], _ body: (Int, Range<Int>) -> Bool
    ) throws(BitstreamError) {
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
            guard body(type, offset..<(offset + size)) else { return }
            offset += size
        }
    }
}
