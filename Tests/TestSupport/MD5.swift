import Foundation

/// RFC 1321 MD5, incremental. The tests compare decoded pictures with `md5sum` and ffmpeg's
/// `framemd5` output; CryptoKit is not available on Linux and this is all the tests need.
public struct MD5 {
    public init() {}

    private var state: (UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476)
    private var pending: [UInt8] = []
    private var length: UInt64 = 0

    private static let shifts: [UInt32] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
        5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
        4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
        6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ]
    private static let constants: [UInt32] = (0..<64).map { index in
        UInt32(truncatingIfNeeded: Int64(abs(sin(Double(index + 1))) * 4_294_967_296.0))
    }

    public mutating func update(_ bytes: some Collection<UInt8>) {
        pending.append(contentsOf: bytes)
        length += UInt64(bytes.count)
        var digest = state
        var consumed = 0
        pending.withUnsafeBufferPointer { buffer in
            while consumed + 64 <= buffer.count {
                digest = MD5.compress(digest, UnsafeBufferPointer(rebasing: buffer[consumed..<consumed + 64]))
                consumed += 64
            }
        }
        state = digest
        pending.removeFirst(consumed)
    }

    public mutating func finalize() -> String {
        let bitLength = length &* 8
        var tail: [UInt8] = [0x80]
        while (pending.count + tail.count) % 64 != 56 { tail.append(0) }
        for shift in stride(from: 0, to: 64, by: 8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        let savedLength = length
        update(tail)
        length = savedLength
        return [state.0, state.1, state.2, state.3].map { word in
            (0..<4).map { byte in
                let value = UInt8(truncatingIfNeeded: word >> UInt32(byte * 8))
                return String(value, radix: 16).count == 1 ? "0" + String(value, radix: 16) : String(value, radix: 16)
            }.joined()
        }.joined()
    }

    public static func hex(_ bytes: some Collection<UInt8>) -> String {
        var md5 = MD5()
        md5.update(bytes)
        return md5.finalize()
    }

    /// The MD5 of `items` one after another, each written out by `write`: decoded pictures'
    /// packed planes, say, so that the digest matches `-f rawvideo - | md5sum`.
    public static func hex<Items: Sequence>(
        _ items: Items, writing write: (Items.Element, inout [UInt8]) -> Void
    ) -> String {
        var md5 = MD5()
        for item in items {
            var bytes: [UInt8] = []
            write(item, &bytes)
            md5.update(bytes)
        }
        return md5.finalize()
    }

    private static func compress(
        _ state: (UInt32, UInt32, UInt32, UInt32), _ block: UnsafeBufferPointer<UInt8>
    ) -> (UInt32, UInt32, UInt32, UInt32) {
        var words = [UInt32](repeating: 0, count: 16)
        for index in 0..<16 {
            words[index] = UInt32(block[index * 4]) | UInt32(block[index * 4 + 1]) << 8
                | UInt32(block[index * 4 + 2]) << 16 | UInt32(block[index * 4 + 3]) << 24
        }
        var (a, b, c, d) = state
        for round in 0..<64 {
            var f: UInt32
            var g: Int
            switch round {
            case 0..<16: f = (b & c) | (~b & d); g = round
            case 16..<32: f = (d & b) | (~d & c); g = (5 * round + 1) % 16
            case 32..<48: f = b ^ c ^ d; g = (3 * round + 5) % 16
            default: f = c ^ (b | ~d); g = (7 * round) % 16
            }
            f = f &+ a &+ MD5.constants[round] &+ words[g]
            a = d
            d = c
            c = b
            let shift = MD5.shifts[round]
            b = b &+ ((f << shift) | (f >> (32 - shift)))
        }
        return (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d)
    }
}

