import Decoding

/// One switch to another back end, as a session's `fallbacks` lists it (openapi.yaml
/// `BackendFallback`); `device` is `null` when none was in use, `codec` when the switch came
/// before the stream's codec was known.
struct BackendFallbackJSON: WireObject {
    let fallback: BackendFallback

    init(_ fallback: BackendFallback) { self.fallback = fallback }

    var members: KeyValuePairs<String, any Encodable> {
        [
            "reason": fallback.reason.rawValue,
            "codec": fallback.codec?.rawValue,
            "from": fallback.from.rawValue,
            "to": fallback.to.rawValue,
            "device": fallback.device?.description,
            "message": fallback.message,
            "afterFrames": fallback.afterFrames,
        ]
    }
}
