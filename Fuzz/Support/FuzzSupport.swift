// Shared by every fuzz target (compiled into each; see the Makefile's fuzz section).

/// Stops the run when an invariant does not hold. The trap is what libFuzzer reports as a
/// crash, saving the input; the message names the invariant in the log.
func require(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
    file: StaticString = #fileID, line: UInt = #line
) {
    if !condition() { fatalError("fuzz invariant broken: \(message())", file: file, line: line) }
}

/// The bytes libFuzzer hands over, copied (the targets keep them beyond the call's lifetime
/// only in their own arrays).
func fuzzInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// A deterministic generator seeded from the input itself, so that every choice a target makes
/// (chunk sizes, limits) is reproduced exactly when libFuzzer replays a saved input.
struct SplitMix64 {
    private var state: UInt64

    /// FNV-1a of the bytes, mixed once more by the first `next()`.
    init(seededBy bytes: [UInt8], salt: UInt64 = 0) {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325 ^ salt
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        state = hash
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform enough in 1...upperBound for choosing sizes (modulo bias does not matter here).
    mutating func next(upTo upperBound: Int) -> Int { 1 + Int(next() % UInt64(upperBound)) }

    /// Piece sizes that add up to `total`: mostly tiny pieces (start codes and units cut
    /// everywhere), some medium and some large (whole units per piece, as real uploads go).
    mutating func pieces(total: Int) -> [Int] {
        var pieces: [Int] = []
        var left = total
        while left > 0 {
            let size: Int
            switch next() % 10 {
            case 0...4: size = next(upTo: 4)
            case 5...7: size = next(upTo: 300)
            default: size = next(upTo: 8192)
            }
            pieces.append(min(size, left))
            left -= min(size, left)
        }
        return pieces
    }
}
