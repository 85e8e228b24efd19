import Decoding

/// What a picture request asks for.
public enum PictureFormat: String, Sendable, CaseIterable {
    /// Baseline JFIF JPEG (full-range BT.601 YCbCr, the only range JFIF defines).
    case jpeg
    /// The decoder's planar pixel format, tightly packed and cropped (ffmpeg `-f rawvideo` layout).
    case yuv
    /// Packed 8-bit RGB (`rgb24`), full range.
    case rgb
}

/// Output options of one picture request.
public struct PictureOptions: Hashable, Sendable {
    /// Largest accepted width or height, the same bound the decoder puts on input pictures.
    public static let maxDimension = PictureSizeLimit.defaultMaxSide
    public static let qualityRange = 1...100
    public static let defaultQuality = 85

    public var format: PictureFormat
    /// Requested output width; nil keeps the source width (or follows the aspect ratio of `height`).
    public var width: Int?
    /// Requested output height; nil keeps the source height (or follows the aspect ratio of `width`).
    public var height: Int?
    /// JPEG quality 1...100; ignored by the raw formats.
    public var quality: Int

    public init(format: PictureFormat = .jpeg, width: Int? = nil, height: Int? = nil, quality: Int = defaultQuality) {
        self.format = format
        self.width = width
        self.height = height
        self.quality = quality
    }

    /// Returns `self` when every value is in range, otherwise `.invalidOptions` naming the culprit.
    public func validated() throws(ImagingError) -> PictureOptions {
        if let width, !(1...Self.maxDimension).contains(width) {
            throw ImagingError(.invalidOptions, "width must be 1...\(Self.maxDimension), got \(width)")
        }
        if let height, !(1...Self.maxDimension).contains(height) {
            throw ImagingError(.invalidOptions, "height must be 1...\(Self.maxDimension), got \(height)")
        }
        if !Self.qualityRange.contains(quality) {
            throw ImagingError(
                .invalidOptions,
                "quality must be \(Self.qualityRange.lowerBound)...\(Self.qualityRange.upperBound), got \(quality)")
        }
        return self
    }
}

/// The size a picture request produces from a source picture.
///
/// Both given: exactly that size. One given: the other follows the source's storage aspect
/// ratio (sample aspect ratio is ignored, like `ffmpeg -vf scale=W:-1`), rounded to nearest
/// and at least 1. Neither: the source size.
public func outputSize(sourceWidth: Int, sourceHeight: Int, width: Int?, height: Int?) -> (width: Int, height: Int) {
    let sourceWidth = max(sourceWidth, 1)
    let sourceHeight = max(sourceHeight, 1)
    switch (width, height) {
    case let (width?, height?):
        return (width, height)
    case let (width?, nil):
        return (width, max(1, roundedRatio(sourceHeight * width, sourceWidth)))
    case let (nil, height?):
        return (max(1, roundedRatio(sourceWidth * height, sourceHeight)), height)
    case (nil, nil):
        return (sourceWidth, sourceHeight)
    }
}

/// `numerator / denominator` rounded half up, in integers so results never depend on float rounding.
private func roundedRatio(_ numerator: Int, _ denominator: Int) -> Int {
    (2 * numerator + denominator) / (2 * denominator)
}
