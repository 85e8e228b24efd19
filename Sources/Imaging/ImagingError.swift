import VideoCoding

/// What went wrong while turning a decoded picture into bytes (JPEG, raw YUV or RGB).
public typealias ImagingError = CodedError<ImagingErrorCode>

/// `ImagingError`'s stable, machine-readable codes. Never rename a raw value: clients match on them.
public enum ImagingErrorCode: String, Sendable, CaseIterable {
    /// TurboJPEG or libswscale could not produce the picture.
    case encodeFailed = "encode_failed"
    /// An encoder, scaler or output buffer could not be allocated.
    case allocationFailed = "allocation_failed"
    /// A requested size or quality is out of range.
    case invalidOptions = "invalid_parameter"
}
