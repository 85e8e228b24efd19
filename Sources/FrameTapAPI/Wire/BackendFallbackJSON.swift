import Decoding

/// One switch to another back end, as a session's `fallbacks` lists it (openapi.yaml
/// `BackendFallback`); `device` is `null` when none was in use, `codec` when the switch came
/// before the stream's codec was known.
struct BackendFallbackJSON: Encodable {
    let fallback: BackendFallback

    init(_ fallback: BackendFallback) { self.fallback = fallback }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(fallback.reason.rawValue, forKey: .reason)
        try container.encode(fallback.codec?.rawValue, forKey: .codec)
        try container.encode(fallback.from.rawValue, forKey: .from)
        try container.encode(fallback.to.rawValue, forKey: .to)
        try container.encode(fallback.device?.description, forKey: .device)
        try container.encode(fallback.message, forKey: .message)
        try container.encode(fallback.afterFrames, forKey: .afterFrames)
    }

    private enum Key: String, CodingKey { case reason, codec, from, to, device, message, afterFrames }
}
