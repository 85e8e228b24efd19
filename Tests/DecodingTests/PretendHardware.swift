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
    pushAllNumbered(bytes, into: decoder).output
}

/// Every picture of `bytes` and its number (`PictureNumbering`), in output order.
func pushAllNumbered(_ bytes: [UInt8], into decoder: StreamDecoder) -> (output: DecodeOutput, numbers: [UInt64]) {
    var all = DecodeOutput()
    var numbers: [UInt64] = []
    let keep: (DecodedFrame, UInt64) -> Void = { frame, number in
        all.frames.append(frame)
        numbers.append(number)
    }
    var offset = 0
    bytes.withUnsafeBytes { buffer in
        while offset < buffer.count {
            let end = min(buffer.count, offset + 4096)
            all.errors += decoder.push(UnsafeRawBufferPointer(rebasing: buffer[offset..<end]), onPicture: keep)
            offset = end
        }
    }
    all.errors += decoder.finish(onPicture: keep)
    return (all, numbers)
}
