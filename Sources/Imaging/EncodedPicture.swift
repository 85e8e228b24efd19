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

    /// Takes ownership of `storage`, which must come from `UnsafeMutableRawBufferPointer.allocate`.
    init(
        taking storage: UnsafeMutableRawBufferPointer, format: PictureFormat, width: Int, height: Int,
        pixelFormatName: String?
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
