import VideoCoding

/// What went wrong taking an input in, with a stable `code`.
public typealias IngestError = CodedError<IngestErrorCode>

/// `IngestError`'s stable, machine-readable codes. Never rename a raw value: clients match on them.
public enum IngestErrorCode: String, Sendable, CaseIterable {
    /// An upload's body passed its limit (`--max-body-bytes`, or `--max-spool-bytes` for one
    /// answered as multipart/mixed).
    case bodyTooLarge = "body_too_large"
    /// The spool file of an upload answered as multipart/mixed could not be created, written or read.
    case spoolFailed = "io_error"
    /// The uploads answered as multipart/mixed hold all the spool the server allows them
    /// together (`--max-spool-total-bytes`).
    case spoolFull = "spool_full"
    /// Bytes were offered to an upload that had already ended: a caller's mistake, answered as
    /// an invalid parameter.
    case uploadEnded = "invalid_parameter"
    /// A push's Content-Type and its bytes disagree (an MP4 file sent as `video/mp2t`, a
    /// container sent as `video/H264`), or it names a form, which no stream is.
    case contentTypeMismatch = "content_type_mismatch"
    /// The upload's chunked framing broke (a chunk size that is not hexadecimal, a chunk not
    /// ended by CRLF): what came before the fault is taken, nothing after it is read.
    case invalidChunkedEncoding = "invalid_chunked_encoding"
    /// The upload's body went too slowly (`--body-timeout`): the server cut it off, answering
    /// 408; what came before is taken.
    case bodyTimeout = "body_timeout"
}
