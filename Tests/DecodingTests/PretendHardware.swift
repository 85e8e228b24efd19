import Decoding
import Foundation
import HardwareTestSupport
import TestSupport

extension Fixtures {
    /// The manifest's MD5 of a fixture's raw pictures.
    static func md5(_ name: String) -> String? { (try? entry(name))?.yuvMD5 }

    /// The manifest's picture count of a fixture.
    static func frameCount(_ name: String) -> Int? { (try? entry(name))?.frames }
}

/// Pushes a whole stream through `decoder` in 4 KiB pieces, then finishes it.
func pushAll(_ bytes: [UInt8], into decoder: StreamDecoder) -> DecodeOutput {
    var all = DecodeOutput()
    var offset = 0
    while offset < bytes.count {
        let end = min(bytes.count, offset + 4096)
        let output = decoder.push(Array(bytes[offset..<end]))
        all.frames += output.frames
        all.errors += output.errors
        offset = end
    }
    let tail = decoder.finish()
    all.frames += tail.frames
    all.errors += tail.errors
    return all
}
