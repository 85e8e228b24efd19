import CFFmpeg
import H264

/// libavutil's text for an error code, e.g. "Invalid data found when processing input".
func avErrorString(_ code: Int32) -> String {
    var buffer = [CChar](repeating: 0, count: Int(AV_ERROR_MAX_STRING_SIZE))
    av_strerror(code, &buffer, buffer.count)
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Maps a negative libav* return value to the pipeline's error type. `operation` names the
/// call that failed so the message says where.
func frameTapError(averror code: Int32, _ operation: String) -> FrameTapError {
    // `what` says what failed in the user's terms, libavutil's text says why; the numeric code
    // and the C function name help no one reading an HTTP problem or a CLI message.
    let message = "\(operation): \(avErrorString(code))"
    switch code {
    case ft_averror_invaliddata(): return FrameTapError(.invalidData, message)
    case ft_averror_enomem(): return FrameTapError(.allocationFailed, message)
    case ft_averror_patchwelcome(): return FrameTapError(.unsupportedStream, message)
    default: return FrameTapError(.decoderFailure, message)
    }
}
