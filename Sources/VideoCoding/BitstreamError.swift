/// What is wrong with the bytes of a stream, as found by the bitstream layer (splitter,
/// parameter sets, slice headers, SEI, AVCC), for H.264 and H.265 alike.
///
/// Only bitstream facts live here. Decoding, imaging and the service have error types of their
/// own, each of which can carry a bitstream code on (e.g. `DecodeError(BitstreamError)`), so
/// the `code` strings a client sees for bitstream problems are defined exactly once, here.
public typealias BitstreamError = CodedError<BitstreamErrorCode>

/// `BitstreamError`'s stable, machine-readable codes. Never rename a raw value: clients match on them.
public enum BitstreamErrorCode: String, Sendable, CaseIterable {
    /// The bytes are not a valid H.264 or H.265 elementary stream (or a parameter set is malformed).
    case invalidData = "invalid_data"
    /// A NAL unit exceeded the configured size cap.
    case nalTooLarge = "nal_too_large"
    /// A caller passed an argument the format cannot take (e.g. an AVCC length size of 3).
    case invalidArgument = "invalid_parameter"
}
