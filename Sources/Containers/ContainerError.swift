import VideoCoding

/// What went wrong reading a container or pulling a stream, with a stable `code`.
public typealias ContainerError = CodedError<ContainerErrorCode>

/// `ContainerError`'s stable, machine-readable codes. Never rename a raw value: clients match on them.
public enum ContainerErrorCode: String, Sendable, CaseIterable {
    /// The video track is of a codec FrameTap does not decode (VP8, VP9, AV1, MJPEG, ...).
    case unsupportedCodec = "unsupported_codec"
    /// The container holds no video track (audio or data only).
    case noVideoTrack = "no_video_track"
    /// libavformat cannot read the container: malformed, truncated, or not what it says.
    case invalidContainer = "invalid_container"
    /// The demuxer had to seek back to bytes no longer kept (an MP4 whose moov follows more
    /// media data than the seek window holds).
    case containerNeedsSeeking = "container_needs_seeking"
    /// The source URL, or a redirect, names a scheme or host `--allow-sources` does not allow.
    case sourceNotAllowed = "source_not_allowed"
    /// The source URL is malformed or of a scheme FrameTap does not pull.
    case invalidSource = "invalid_source"
    /// The source's host could not be resolved or refused the connection.
    case sourceUnreachable = "source_unreachable"
    /// The source did not answer, or stopped sending, within the timeout.
    case sourceTimeout = "source_timeout"
    /// The source refused the credentials, or gave none access (HTTP or RTSP 401 or 403).
    case sourceUnauthorized = "source_unauthorized"
    /// The source has nothing at that path (HTTP or RTSP 404).
    case sourceNotFound = "source_not_found"
    /// The source answered with another error (HTTP or RTSP status, protocol failure).
    case sourceFailed = "source_failed"
    /// The source ended its stream.
    case sourceEnded = "source_ended"
}
