/// The codecs FrameTap reads, by the names the rest of the product uses for them (JSON values,
/// options). Never change a raw value: clients match on them.
public enum VideoCodec: String, Sendable, CaseIterable {
    case h264
    case h265

    /// "H.264", "H.265", for messages.
    public var displayName: String {
        switch self {
        case .h264: "H.264"
        case .h265: "H.265"
        }
    }
}
