import CFFmpeg
import VideoCoding

/// What went wrong while turning bytes into pictures: a bitstream problem found on the way
/// (`init(_: BitstreamError)` keeps its code), or a decoder-side one.
public typealias DecodeError = CodedError<DecodeErrorCode>

/// `DecodeError`'s stable, machine-readable codes. Never rename a raw value: clients match on them.
public enum DecodeErrorCode: String, Sendable, CaseIterable {
    /// Not a valid H.264 stream: from the bitstream layer, or libavcodec's AVERROR_INVALIDDATA.
    case invalidData = "invalid_data"
    /// A NAL unit exceeded the configured size cap (the splitter dropped it).
    case nalTooLarge = "nal_too_large"
    /// Valid H.264 that this build cannot decode (e.g. an SVC/MVC-only stream).
    case unsupportedStream = "unsupported_stream"
    /// The SPS announces a picture above the configured size limit.
    case pictureTooLarge = "picture_too_large"
    /// Decoding the stream would take more memory than the decoder budget has left.
    case decoderMemoryExceeded = "decoder_memory_exceeded"
    /// The bytes carry parameter sets of another codec than the stream's (stated or detected).
    case codecMismatch = "codec_mismatch"
    /// No parameter set of any codec FrameTap reads (H.264, H.265) in what arrived.
    case unknownCodec = "unknown_codec"
    /// NAL units each after a length (AVCC/HVCC, an encoder's or an MP4 sample's) where an
    /// Annex B stream was expected.
    case lengthPrefixedUnits = "length_prefixed_units"
    /// The requested decoder back end cannot be opened, or refuses the stream.
    case decoderUnavailable = "decoder_unavailable"
    /// A C allocation (frame, packet, context, buffer) failed.
    case allocationFailed = "allocation_failed"
    /// The stream ended without a single decodable picture.
    case noDecodablePicture = "no_decodable_picture"
    /// An option is out of range (thread count, size limits...).
    case invalidOptions = "invalid_parameter"
    /// A libavcodec call failed for a reason not covered above.
    case decoderFailure = "decoder_failure"

    init(_ code: BitstreamError.Code) {
        switch code {
        case .invalidData: self = .invalidData
        case .nalTooLarge: self = .nalTooLarge
        case .invalidArgument: self = .invalidOptions
        }
    }
}

extension DecodeError {
    public init(_ error: BitstreamError) {
        self.init(Code(error.code), error.message)
    }

    /// Whether, from a hardware decoder, this error points at the device rather than the
    /// bitstream: libavcodec reports a failed NVDEC/VA-API call as an unknown or allocation
    /// error ("No decoder surfaces left"), and broken input as invalid data.
    public var suggestsDeviceFailure: Bool {
        code == .decoderFailure || code == .allocationFailed
    }

    /// Maps a negative libav* return value. `operation` says what failed in the user's terms,
    /// libavutil's text says why; the numeric code and the C function name help no one reading
    /// an HTTP problem or a CLI message.
    init(averror status: Int32, _ operation: String) {
        let message = "\(operation): \(avErrorString(status))"
        switch status {
        case ft_averror_invaliddata(): self.init(.invalidData, message)
        case ft_averror_enomem(): self.init(.allocationFailed, message)
        case ft_averror_patchwelcome(): self.init(.unsupportedStream, message)
        default: self.init(.decoderFailure, message)
        }
    }
}

/// libavutil's text for an error code, e.g. "Invalid data found when processing input".
func avErrorString(_ code: Int32) -> String {
    var buffer = [CChar](repeating: 0, count: Int(AV_ERROR_MAX_STRING_SIZE))
    av_strerror(code, &buffer, buffer.count)
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
