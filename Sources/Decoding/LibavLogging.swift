import CFFmpeg

/// libavcodec prints its own diagnostics ("no frame!", "non-existing PPS") to stderr. Every
/// one of them already surfaces as a counted `DecodeError`, so by default the library is
/// silenced; `--log-level debug` lets its warnings through for troubleshooting.
public enum LibavLogging {
    public enum Verbosity: Sendable {
        case quiet, errors, warnings, verbose
    }

    public static func set(_ verbosity: Verbosity) {
        switch verbosity {
        case .quiet: av_log_set_level(AV_LOG_QUIET)
        case .errors: av_log_set_level(AV_LOG_ERROR)
        case .warnings: av_log_set_level(AV_LOG_WARNING)
        case .verbose: av_log_set_level(AV_LOG_VERBOSE)
        }
    }
}
