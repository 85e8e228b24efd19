import CFFmpeg
import Decoding

/// JPEG on the GPU for pictures NVDEC decoded, TurboJPEG for everything else, in one encoder.
///
/// A JPEG at the picture's own size of an 8-bit 4:2:0 picture still on the device is encoded
/// there (`DeviceJPEGBackend`), and only the JPEG crosses PCIe: the picture is never
/// downloaded. Every other request (raw formats, other sizes, 10-bit pictures, pictures already
/// in system memory) goes to the inner `TurboJPEGEncoder`, which downloads as it always has.
///
/// A device encode that fails serves that picture on the CPU and `identity` says so; after
/// `failureLimit` failures in a row the encoder stops trying the device and reports itself as
/// `turbojpeg`, with the last error as the reason.
final class NvJPEGEncoder: PictureEncoding {
    static let name = "nvjpeg"
    /// Failed device pictures in a row after which the device is no longer tried.
    static let failureLimit = 3

    private(set) var identity: PictureEncoderIdentity
    private let reason: String
    private let inner: TurboJPEGEncoder
    private let platform: any DeviceJPEGPlatform
    private var backend: (any DeviceJPEGBackend)?
    private var failuresInARow = 0
    private var gaveUp = false

    init(platform: any DeviceJPEGPlatform, reason: String) throws(ImagingError) {
        self.platform = platform
        self.reason = reason
        inner = try TurboJPEGEncoder(reason: reason)
        identity = PictureEncoderIdentity(name: Self.name, reason: reason)
    }

    func encode(_ frame: DecodedFrame, _ options: PictureOptions) throws(ImagingError) -> EncodedPicture {
        let options = try options.validated()
        guard !gaveUp else { return try inner.encode(frame, options) }
        if options.format == .jpeg, let why = Self.neverOnTheDevice(frame) {
            // What this session's JPEGs are encoded by, whatever the server chose.
            identity = PictureEncoderIdentity(name: TurboJPEGEncoder.name, reason: "\(reason); but \(why), so TurboJPEG encodes them")
            return try inner.encode(frame, options)
        }
        guard Self.devicePathServes(frame, options) else { return try inner.encode(frame, options) }
        let attempt: Result<EncodedPicture, DeviceJPEGError>? = frame.withDeviceSurface { surface in
            guard let surface else { return nil }  // downloaded meanwhile: the CPU reads it as it is
            do throws(DeviceJPEGError) {
                let backend: any DeviceJPEGBackend
                if let existing = self.backend {
                    backend = existing
                } else {
                    backend = try platform.makeBackend()
                    self.backend = backend
                }
                let jpeg = try backend.encodeJPEG(
                    surface, width: frame.width, height: frame.height, mapping: DeviceSampleMapping(frame),
                    quality: options.quality)
                return .success(
                    EncodedPicture(copying: jpeg, format: .jpeg, width: frame.width, height: frame.height, pixelFormatName: nil))
            } catch {
                return .failure(error)
            }
        }
        switch attempt {
        case .none:
            return try inner.encode(frame, options)
        case .success(let picture):
            failuresInARow = 0
            identity = PictureEncoderIdentity(name: Self.name, reason: reason)
            return picture
        case .failure(let error):
            failuresInARow += 1
            backend = nil
            if failuresInARow >= Self.failureLimit {
                gaveUp = true
                identity = PictureEncoderIdentity(
                    name: TurboJPEGEncoder.name,
                    reason: "nvJPEG failed on \(failuresInARow) pictures in a row and is no longer tried (last: \(error))")
            } else {
                identity = PictureEncoderIdentity(
                    name: Self.name,
                    reason: "\(reason); the last picture fell back to TurboJPEG because nvJPEG failed: \(error)")
            }
            return try inner.encode(frame, options)
        }
    }

    /// Why no JPEG of pictures like `frame` is ever encoded on the device, whatever its size;
    /// nil for a picture NVDEC decoded into 8-bit 4:2:0.
    static func neverOnTheDevice(_ frame: DecodedFrame) -> String? {
        guard frame.decodedBy == .cuda else {
            return "this session's pictures are decoded by \(frame.decodedBy.rawValue) into system memory"
        }
        guard frame.pixelFormat == AV_PIX_FMT_YUV420P || frame.pixelFormat == AV_PIX_FMT_YUVJ420P else {
            return "this session's pictures are \(frame.pixelFormatName), and the GPU path takes 8-bit 4:2:0 only"
        }
        return nil
    }

    /// A JPEG of an 8-bit 4:2:0 picture NVDEC decoded, at the picture's own size.
    static func devicePathServes(_ frame: DecodedFrame, _ options: PictureOptions) -> Bool {
        guard options.format == .jpeg, frame.decodedBy == .cuda, frame.isOnDevice else { return false }
        let size = outputSize(sourceWidth: frame.width, sourceHeight: frame.height, width: options.width, height: options.height)
        guard size.width == frame.width, size.height == frame.height else { return false }
        return frame.pixelFormat == AV_PIX_FMT_YUV420P || frame.pixelFormat == AV_PIX_FMT_YUVJ420P
    }
}

/// `NvJPEGEncoder`s on one platform.
struct NvJPEGEncoderFactory: PictureEncoderFactory {
    let platform: any DeviceJPEGPlatform
    let reason: String

    var identity: PictureEncoderIdentity { PictureEncoderIdentity(name: NvJPEGEncoder.name, reason: reason) }

    func makeEncoder() throws(ImagingError) -> any PictureEncoding {
        try NvJPEGEncoder(platform: platform, reason: reason)
    }
}
