import Decoding
import Synchronization

/// One finished picture: immutable bytes in memory it owns, at an address that never moves,
/// so an HTTP response can point at them without a copy for as long as it holds the object.
///
/// The bytes are written once before init returns and never again; their address is kept in a
/// Mutex, which makes sharing it checked (reading it is an uncontended lock).
public final class EncodedPicture: Sendable {
    private let memory: Mutex<UnsafeRawBufferPointer>
    public var bytes: UnsafeRawBufferPointer { memory.withLock { $0 } }
    /// `image/jpeg`, or `application/octet-stream` for raw pixels (no registered media type
    /// describes headerless planes; `pixelFormatName`, `width` and `height` do).
    public let contentType: String
    public let format: PictureFormat
    public let width: Int
    public let height: Int
    /// libavutil's name of the raw layout (`yuv420p`, `yuv420p10le`, `rgb24`...); nil for JPEG.
    public let pixelFormatName: String?
    /// How raw samples are to be read; nil for JPEG (which is BT.601 at full range, always).
    public let colors: PictureColors?

    /// Takes ownership of `storage`, which must come from `UnsafeMutableRawBufferPointer.allocate`.
    init(
        taking storage: UnsafeMutableRawBufferPointer, format: PictureFormat, width: Int, height: Int,
        pixelFormatName: String?, colors: PictureColors? = nil
    ) {
        // Ownership is taken here: the caller allocated `storage` for this picture, filled it, and
        // keeps no pointer to it. The region checker cannot follow that through the copies that
        // filled it, hence the one explicit hand-over.
        nonisolated(unsafe) let owned = UnsafeRawBufferPointer(storage)
        self.memory = Mutex(owned)
        self.format = format
        self.contentType = format == .jpeg ? "image/jpeg" : "application/octet-stream"
        self.width = width
        self.height = height
        self.pixelFormatName = pixelFormatName
        self.colors = colors
    }

    /// A picture holding a private copy of `source` (for callers that already have encoded bytes).
    public convenience init(
        copying source: UnsafeRawBufferPointer, format: PictureFormat, width: Int, height: Int,
        pixelFormatName: String?
    ) {
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: source.count, alignment: 64)
        storage.copyMemory(from: source)
        self.init(taking: storage, format: format, width: width, height: height, pixelFormatName: pixelFormatName)
    }

    deinit {
        UnsafeMutableRawBufferPointer(mutating: bytes).deallocate()
    }

    public var count: Int { bytes.count }
}

/// How a raw picture's samples are to be read: their range, and the matrix of their YCbCr (for
/// RGB, the matrix its YCbCr was converted with). A stream that states no matrix is read as
/// BT.601 below 720 lines and BT.709 from 720 up, as FrameTap converts it and as players do.
public struct PictureColors: Sendable, Equatable {
    public let range: ColorRange
    /// Never `unspecified` (`ColorMatrix.effective`); `rgb` for planes of G, B and R.
    public let matrix: ColorMatrix

    init(range: ColorRange, matrix: ColorMatrix, height: Int) {
        self.range = range
        self.matrix = matrix.effective(height: height)
    }

    /// An RGB picture converted from a picture of `matrix` (`TurboJPEGEncoder.swsColorspace`:
    /// swscale reads YCgCo with BT.601's): full range.
    static func rgb(convertedFrom matrix: ColorMatrix, height: Int) -> PictureColors {
        PictureColors(range: .full, matrix: matrix == .ycgco ? .bt601 : matrix, height: height)
    }
}

extension EncodedPicture {
    /// Scoped access that keeps the picture alive for the whole closure. Reading `bytes`
    /// directly is only safe while the caller itself holds the picture.
    public func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        defer { withExtendedLifetime(self) {} }
        return try body(bytes)
    }
}
