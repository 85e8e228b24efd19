import CFFmpeg
import Decoding

/// Why a device JPEG could not be made: a CUDA or nvJPEG call failed, or the surface is not one
/// the device path takes. The encoder then serves the picture on the CPU and says why.
struct DeviceJPEGError: Error, Equatable, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Encodes JPEG from a picture that is still in GPU memory: the seam between `NvJPEGEncoder`
/// (which decides what goes to the device and what falls back) and the CUDA and nvJPEG calls,
/// so tests can drive the encoder with a pretend device.
///
/// Not thread-safe: one per encoder, like the encoder itself.
protocol DeviceJPEGBackend: AnyObject {
    /// The JPEG of `surface` (a decoder's hardware frame, uncropped on the left and top; its
    /// visible picture is `width`×`height`) at `quality`, 4:2:0, its samples made JPEG's on the
    /// device first as `mapping` says. The bytes stay valid until the next call.
    func encodeJPEG(
        _ surface: UnsafePointer<AVFrame>, width: Int, height: Int, mapping: DeviceSampleMapping, quality: Int
    ) throws(DeviceJPEGError) -> UnsafeRawBufferPointer
}

/// How a picture's samples become JPEG's (BT.601 at full range) on the device: as the CPU
/// encoder makes them, so both encoders compress the same bytes.
enum DeviceSampleMapping: Equatable {
    /// BT.601 samples: the range alone changes (`RangeExpansion`'s tables; none at full range).
    case range(ColorRange)
    /// Another matrix (BT.709 for almost every HD camera): `JPEGColor`'s conversion, which
    /// carries the range too.
    case matrix(JPEGColor)

    init(_ frame: DecodedFrame) {
        if let color = JPEGColor(matrix: frame.colorMatrix, height: frame.height, fullRange: frame.colorRange == .full) {
            self = .matrix(color)
        } else {
            self = .range(frame.colorRange)
        }
    }
}

/// What a machine offers for device JPEG: whether it can (a library, a driver, a device) and
/// the backends themselves. Asked once, when the encoder factory is chosen.
protocol DeviceJPEGPlatform: Sendable {
    /// nil when device JPEG can serve; otherwise why not, for people.
    var unavailability: String? { get }
    /// What serves, for people (library and device count), when `unavailability` is nil.
    var description: String { get }
    /// A backend for one encoder. Made on the encoder's first device picture, so a failure
    /// counts as that picture's failure.
    func makeBackend() throws(DeviceJPEGError) -> any DeviceJPEGBackend
}
