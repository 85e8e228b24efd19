import Decoding

/// How an 8-bit limited-range picture at native size becomes full range for JPEG.
@_spi(Benchmarking) public enum RangeExpansionMethod: Sendable, CaseIterable {
    /// A 256-entry table per component, applied row by row into reusable planes.
    case lookupTable
    /// swscale, same format and size, limited source range to full output range.
    case swscale
}

/// Limited ("TV", 16–235 luma / 16–240 chroma) to full (0–255) range, 8-bit, via tables.
enum RangeTables {
    static let luma: [UInt8] = table { (Double($0) - 16) * 255 / 219 }
    static let chroma: [UInt8] = table { (Double($0) - 128) * 255 / 224 + 128 }

    private static func table(_ expand: (Int) -> Double) -> [UInt8] {
        (0..<256).map { UInt8(min(max(expand($0).rounded(), 0), 255)) }
    }

    /// Writes `rows` rows of `rowBytes` samples through `table`.
    static func apply(
        _ table: [UInt8], from source: UnsafePointer<UInt8>, sourceStride: Int,
        to output: UnsafeMutablePointer<UInt8>, outputStride: Int, rowBytes: Int, rows: Int
    ) {
        table.withUnsafeBufferPointer { table in
            guard let lookup = table.baseAddress else { return }
            for row in 0..<rows {
                let input = source + row * sourceStride
                let result = output + row * outputStride
                for column in 0..<rowBytes {
                    result[column] = lookup[Int(input[column])]
                }
            }
        }
    }
}
