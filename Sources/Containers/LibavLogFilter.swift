import CFFmpeg
import Synchronization

/// libavformat's own log lines (`--log-level debug` lets its warnings through) name URLs now
/// and then ("Redirecting to rtsp://user:password@..."): every line goes through
/// `URLRedaction` before it is handed to the process's writer, as FrameTap's own lines do.
public enum LibavLogFilter {
    private static let writer = Mutex<(@Sendable (_ line: String, _ isError: Bool) -> Void)?>(nil)

    /// Routes libav's log lines through the redaction to `write`, saying whether each is an
    /// error or worse (the level is still `LibavLogging`'s).
    public static func install(write: @escaping @Sendable (_ line: String, _ isError: Bool) -> Void) {
        writer.withLock { $0 = write }
        av_log_set_callback { object, level, format, arguments in
            guard level <= av_log_get_level(), let format, let arguments else { return }
            var line = [CChar](repeating: 0, count: 2048)
            var printPrefix: Int32 = 1
            _ = av_log_format_line2(object, level, format, arguments, &line, Int32(line.count), &printPrefix)
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            LibavLogFilter.writer.withLock { $0 }?(URLRedaction.redactURLs(in: text), level <= AV_LOG_ERROR)
        }
    }
}
