/// A rectangle of a picture in luma samples.
public struct PictureRect: Sendable, Equatable {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
}

extension PictureRect {
    /// The visible part of a decoded picture: what `crop` (an SPS's cropping or conformance
    /// window, nil when it has none) leaves, its offsets counted in units of `unitWidth` by
    /// `unitHeight` luma samples. A window that leaves nothing is ignored, as decoders do.
    public init(codedWidth: Int, codedHeight: Int, crop: EdgeOffsets?, unitWidth: Int, unitHeight: Int) {
        self.init(x: 0, y: 0, width: codedWidth, height: codedHeight)
        guard let crop else { return }
        let width = codedWidth - unitWidth * (crop.left + crop.right)
        let height = codedHeight - unitHeight * (crop.top + crop.bottom)
        guard width > 0, height > 0 else { return }
        self.init(x: unitWidth * crop.left, y: unitHeight * crop.top, width: width, height: height)
    }

    /// What is cut from each edge of a `codedWidth` by `codedHeight` picture to leave this
    /// rectangle, in luma samples.
    public func edgeOffsets(codedWidth: Int, codedHeight: Int) -> EdgeOffsets {
        EdgeOffsets(left: x, right: codedWidth - x - width, top: y, bottom: codedHeight - y - height)
    }
}
