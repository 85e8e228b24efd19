/// The one error type of the whole pipeline, from bitstream parsing to HTTP.
///
/// It lives in `H264` because every other FrameTap module depends on this one and the
/// codes must be the same everywhere: the HTTP layer maps each `Code` to a status and
/// puts `code.rawValue` in the `code` member of its problem+json body.
public struct FrameTapError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable, machine-readable codes. Never rename a case's raw value: clients match on it.
    public enum Code: String, Sendable, CaseIterable {
        /// The bytes are not a valid H.264 elementary stream (or a parameter set is malformed).
        case invalidData = "invalid_data"
        /// Valid H.264 that this build cannot decode (e.g. an SVC/MVC-only stream).
        case unsupportedStream = "unsupported_stream"
        /// The requested decoder back end (e.g. VA-API) cannot be opened.
        case decoderUnavailable = "decoder_unavailable"
        /// The SPS announces a picture above the configured size limit.
        case pictureTooLarge = "picture_too_large"
        /// A NAL unit exceeded the configured size cap.
        case nalTooLarge = "nal_too_large"
        /// A C allocation (frame, packet, context, buffer) failed.
        case allocationFailed = "allocation_failed"
        /// The stream ended without a single decodable picture.
        case noDecodablePicture = "no_decodable_picture"
        /// Encoding a picture (JPEG, scaling, pixel conversion) failed.
        case encodeFailed = "encode_failed"
        /// A caller passed an out-of-range option (size, quality, thread count...).
        case invalidParameter = "invalid_parameter"
        /// Reading or writing a file or pipe failed.
        case ioError = "io_error"
        /// A libavcodec call failed for a reason not covered above.
        case decoderFailure = "decoder_failure"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
