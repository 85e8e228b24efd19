@testable import H264
import TestSupport
import VideoCoding

extension BitWriter {
    /// A NAL unit: header byte plus the escaped RBSP (trailing bits added).
    func nal(type: NALUnitType, refIdc: UInt8 = 3, streamOffset: Int = 0) -> NALUnit {
        var copy = self
        copy.trailingBits()
        return NALUnit(bytes: [NALHeader(refIdc: refIdc, type: type).byte] + RBSP.escape(copy.bytes), streamOffset: streamOffset)
    }
}
