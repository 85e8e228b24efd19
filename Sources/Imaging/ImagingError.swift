/// What went wrong while turning a decoded picture into bytes (JPEG, raw YUV or RGB).
public struct ImagingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable, machine-readable codes. Never rename a case's raw value: clients match on it.
    public enum Code: String, Sendable, CaseIterable {
        /// TurboJPEG or libswscale could not produce the picture.
        case encodeFailed = "encode_failed"
        /// An encoder, scaler or output buffer could not be allocated.
        case allocationFailed = "allocation_failed"
        /// A requested size or quality is out of range.
        case invalidOptions = "invalid_parameter"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
