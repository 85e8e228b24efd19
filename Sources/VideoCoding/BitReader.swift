/// Raw byte sequence payloads (H.264 §7.4.1.1, H.265 §7.4.2: the same emulation prevention).
public enum RBSP {
    /// Removes emulation_prevention_three_byte: every 0x03 that follows two zero bytes.
    public static func unescape(_ nalPayload: some Collection<UInt8>) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(nalPayload.count)
        var zeros = 0
        for byte in nalPayload {
            if zeros >= 2 && byte == 3 {
                zeros = 0
                continue
            }
            zeros = byte == 0 ? zeros + 1 : 0
            output.append(byte)
        }
        return output
    }

    /// Inserts emulation_prevention_three_byte where the payload would otherwise contain
    /// 0x000000...0x000003 (the inverse of `unescape`), and after a final pair of zeros.
    public static func escape(_ rbsp: some Collection<UInt8>) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(rbsp.count + rbsp.count / 64 + 1)
        var zeros = 0
        for byte in rbsp {
            if zeros >= 2 && byte <= 3 {
                output.append(3)
                zeros = 0
            }
            zeros = byte == 0 ? zeros + 1 : 0
            output.append(byte)
        }
        if zeros >= 2 { output.append(3) }
        return output
    }
}

/// Reads an RBSP bit by bit, most significant bit first (§7.2 of H.264 and H.265). Every read past the end, and
/// every Exp-Golomb code that does not fit in 32 bits, throws `.invalidData`.
public struct BitReader: Sendable {
    public let bytes: [UInt8]
    /// Bits read so far.
    public private(set) var position = 0

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    public var bitCount: Int { bytes.count * 8 }
    public var bitsLeft: Int { bitCount - position }
    public var isByteAligned: Bool { position & 7 == 0 }

    public mutating func readBit() throws(BitstreamError) -> Bool {
        guard position < bitCount else { throw Self.overrun() }
        let bit = bytes[position >> 3] >> (7 - UInt8(position & 7)) & 1
        position += 1
        return bit == 1
    }

    /// `u(n)` for n in 0...32.
    public mutating func readBits(_ count: Int) throws(BitstreamError) -> UInt32 {
        precondition((0...32).contains(count), "readBits takes 0...32 bits")
        guard count <= bitsLeft else { throw Self.overrun() }
        var value: UInt64 = 0
        var remaining = count
        while remaining > 0 {
            let bitInByte = position & 7
            let available = 8 - bitInByte
            let take = min(available, remaining)
            let byte = UInt64(bytes[position >> 3])
            let chunk = (byte >> UInt64(available - take)) & ((1 << UInt64(take)) - 1)
            value = value << UInt64(take) | chunk
            position += take
            remaining -= take
        }
        return UInt32(value)
    }

    public mutating func readFlag() throws(BitstreamError) -> Bool { try readBit() }

    public mutating func skipBits(_ count: Int) throws(BitstreamError) {
        guard count >= 0, count <= bitsLeft else { throw Self.overrun() }
        position += count
    }

    /// `ue(v)` (H.264 §9.1, H.265 §9.2). Values up to 2^32 - 2, the largest a 32-bit codeNum field can hold.
    public mutating func readUE() throws(BitstreamError) -> UInt32 {
        var leadingZeros = 0
        while try !readBit() {
            leadingZeros += 1
            if leadingZeros > 31 {
                throw BitstreamError(.invalidData, "Exp-Golomb code longer than 32 bits at bit \(position)")
            }
        }
        let suffix = try readBits(leadingZeros)
        return UInt32((UInt64(1) << UInt64(leadingZeros)) - 1 + UInt64(suffix))
    }

    /// `se(v)` (H.264 §9.1.1, H.265 §9.2.2).
    public mutating func readSE() throws(BitstreamError) -> Int32 {
        let codeNum = Int64(try readUE())
        let magnitude = (codeNum + 1) / 2
        return Int32(codeNum & 1 == 1 ? magnitude : -magnitude)
    }

    /// `ue(v)` as an Int, rejected with `.invalidData` when above `maximum` (a syntax element's range).
    public mutating func readUE(max maximum: Int, _ element: @autoclosure () -> String) throws(BitstreamError) -> Int {
        let value = Int(try readUE())
        guard value <= maximum else {
            throw BitstreamError(.invalidData, "\(element()) = \(value) is above its maximum \(maximum)")
        }
        return value
    }

    /// `se(v)` as an Int, rejected with `.invalidData` outside `range`.
    public mutating func readSE(in range: ClosedRange<Int>, _ element: @autoclosure () -> String) throws(BitstreamError) -> Int {
        let value = Int(try readSE())
        guard range.contains(value) else {
            throw BitstreamError(.invalidData, "\(element()) = \(value) is outside \(range)")
        }
        return value
    }

    /// `more_rbsp_data()` (§7.2): true while there is payload before the rbsp_stop_one_bit.
    /// Trailing zero bytes (cabac_zero_words) are not payload.
    public func moreRBSPData() -> Bool {
        var lastByte = bytes.count - 1
        while lastByte >= 0 && bytes[lastByte] == 0 { lastByte -= 1 }
        guard lastByte >= 0 else { return false }
        let stopBit = lastByte * 8 + 7 - bytes[lastByte].trailingZeroBitCount
        return position < stopBit
    }

    private static func overrun() -> BitstreamError {
        BitstreamError(.invalidData, "bitstream ends inside a syntax element")
    }
}

extension BitReader {
    /// The VUI that ends an SPS, behind vui_parameters_present_flag, read by `read`. The VUI is
    /// optional for decoding and cameras with a broken one must still play, so a VUI that cannot
    /// be read is nil with `malformed` set rather than an error; and an SPS truncated before the
    /// flag is still usable (nil, not malformed).
    public mutating func readOptionalVUI<VUI>(
        _ read: (inout BitReader) throws(BitstreamError) -> VUI
    ) throws(BitstreamError) -> (vui: VUI?, malformed: Bool) {
        guard bitsLeft > 0, try readFlag() else { return (nil, false) }
        do {
            return (try read(&self), false)
        } catch {
            return (nil, true)
        }
    }
}
