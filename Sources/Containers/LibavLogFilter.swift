import CFFmpeg

#if canImport(Glibc)
    import Glibc
#endif

/// libavformat's own log lines (`--log-level debug` lets its warnings through) name URLs now
/// and then ("Redirecting to rtsp://user:password@..."): every line goes through
/// `URLRedaction` before it is written to standard error, as FrameTap's own lines do.
public enum LibavLogFilter {
    /// Routes libav's log lines through the redaction (the level is still `LibavLogging`'s).
    public static func install() {
        av_log_set_callback { object, level, format, arguments in
            guard level <= av_log_get_level(), let format, let arguments else { return }
            var line = [CChar](repeating: 0, count: 2048)
            var printPrefix: Int32 = 1
            _ = av_log_format_line2(object, level, format, arguments, &line, Int32(line.count), &printPrefix)
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let redacted = Array(URLRedaction.redactURLs(in: text).utf8)
            _ = redacted.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        }
    }
}
