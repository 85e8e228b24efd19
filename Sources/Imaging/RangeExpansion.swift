import CTurboJPEG
import Decoding

/// How an 8-bit limited-range picture at native size becomes full range for JPEG.
@_spi(Benchmarking) public enum RangeExpansionMethod: Sendable, CaseIterable {
    /// FrameTap's own, row by row into reusable planes: `RangeExpansion` for 8 bits, a
    /// `NarrowingTables` table for deeper samples.
    case builtIn
    /// swscale, same format and size, limited source range to full output range.
    case swscale
}

/// Limited ("TV", 16–235 luma / 16–240 chroma) to full (0–255) range, 8-bit. The tables are for
/// the GPU's kernels; `apply` is the CPU's way, sixteen samples at a time in C
/// (`ft_expand_range_plane`). Both give the same bytes: the rounded formula, which ImagingTests
/// checks the C code against for every byte value.
enum RangeExpansion {
    static let luma: [UInt8] = table { (Double($0) - 16) * 255 / 219 }
    static let chroma: [UInt8] = table { (Double($0) - 128) * 255 / 224 + 128 }

    private static func table(_ expand: (Int) -> Double) -> [UInt8] {
        (0..<256).map { UInt8(min(max(expand($0).rounded(), 0), 255)) }
    }

    /// Writes `rows` rows of `rowBytes` samples, expanded; `output` may be `source`.
    static func apply(
        chroma: Bool, from source: UnsafePointer<UInt8>, sourceStride: Int,
        to output: UnsafeMutablePointer<UInt8>, outputStride: Int, rowBytes: Int, rows: Int
    ) {
        ft_expand_range_plane(source, sourceStride, output, outputStride, rowBytes, rows, chroma ? 1 : 0)
    }
}

/// Samples deeper than 8 bits (9 to 16, little-endian words: H.264 High 10, H.265 Main 10 and
/// the range extensions' 12-bit) to JPEG's 8-bit full range, by one table per depth, range and
/// component kind that holds every input value. The quantisation is ITU-T H.273's: limited range
/// Y = (219·E + 16)·2^(n−8), C = (224·E + 128)·2^(n−8); full range Y = (2^n − 1)·E,
/// C = (2^n − 1)·E + 2^(n−1); each output is that E at 8 bits, rounded (no dither, which would only
/// add noise for the JPEG to code).
enum NarrowingTables {
    struct Key: Hashable {
        let depth: Int
        let fullRange: Bool
        let chroma: Bool
    }

    static func make(_ key: Key) -> [UInt8] {
        let scale = Double(1 << (key.depth - 8))
        let maximum = Double((1 << key.depth) - 1)
        return (0..<(1 << key.depth)).map { sample in
            let value = Double(sample)
            let eight: Double
            switch (key.fullRange, key.chroma) {
            case (false, false): eight = (value / scale - 16) * 255 / 219
            case (false, true): eight = (value / scale - 128) * 255 / 224 + 128
            case (true, false): eight = value * 255 / maximum
            case (true, true): eight = (value - Double(1 << (key.depth - 1))) * 255 / maximum + 128
            }
            return UInt8(min(max(eight.rounded(), 0), 255))
        }
    }

    /// Writes `rows` rows of `samples` 16-bit samples through `table` (whose size is a power of
    /// two: stray bits above the depth cannot index past it).
    static func apply(
        _ table: [UInt8], from source: UnsafePointer<UInt8>, sourceStride: Int,
        to output: UnsafeMutablePointer<UInt8>, outputStride: Int, samples: Int, rows: Int
    ) {
        table.withUnsafeBufferPointer { lookup in
            let mask = lookup.count - 1
            for row in 0..<rows {
                let input = UnsafeRawPointer(source + row * sourceStride)
                let result = output + row * outputStride
                for column in 0..<samples {
                    let value = UInt16(littleEndian: input.loadUnaligned(fromByteOffset: 2 * column, as: UInt16.self))
                    result[column] = lookup[Int(value) & mask]
                }
            }
        }
    }
}
