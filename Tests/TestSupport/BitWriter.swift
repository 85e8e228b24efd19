/// Builds bitstreams for the parser tests of both codecs: u(n), ue(v), se(v), then RBSP
/// trailing bits.
public struct BitWriter: Sendable {
    public private(set) var bytes: [UInt8] = []
    private var bitCount = 0

    public init() {}

    public mutating func bit(_ value: Bool) {
        if bitCount % 8 == 0 { bytes.append(0) }
        if value { bytes[bytes.count - 1] |= 0x80 >> UInt8(bitCount % 8) }
        bitCount += 1
    }

    public mutating func flag(_ value: Bool) { bit(value) }

    public mutating func bits(_ value: UInt64, _ count: Int) {
        for index in stride(from: count - 1, through: 0, by: -1) { bit((value >> UInt64(index)) & 1 == 1) }
    }

    public mutating func u(_ count: Int, _ value: Int) { bits(UInt64(value), count) }

    public mutating func ue(_ value: UInt64) {
        let codeNum = value + 1
        let length = 64 - codeNum.leadingZeroBitCount
        bits(0, length - 1)
        bits(codeNum, length)
    }

    public mutating func ue(_ value: Int) { ue(UInt64(value)) }

    public mutating func se(_ value: Int) {
        ue(value > 0 ? UInt64(2 * value - 1) : UInt64(-2 * value))
    }

    /// rbsp_trailing_bits: a one bit, then zeros to the byte boundary.
    public mutating func trailingBits() {
        bit(true)
        while bitCount % 8 != 0 { bit(false) }
    }

    public var isByteAligned: Bool { bitCount % 8 == 0 }
}
