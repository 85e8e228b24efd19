/// `text/event-stream` framing (WHATWG HTML, "Server-sent events"): a block of `name: value`
/// lines ended by a blank line; a line that starts with `:` is a comment clients ignore.
public enum ServerSentEvents {
    public static let contentType = "text/event-stream; charset=utf-8"

    public enum Field: Sendable {
        /// The client's last event id (sent back as `Last-Event-ID` when it reconnects); a block
        /// with an id and no data moves it without dispatching an event.
        case id(UInt64)
        /// The event type (`message` when left out).
        case event(String)
        /// The payload; a line break in it becomes another `data:` line, as the format requires.
        case data([UInt8])
        /// How long the client waits before it reconnects.
        case retry(milliseconds: Int)
        /// Ignored by clients: a keepalive, or bytes that make the response start.
        case comment(String)
    }

    /// One block: each field on its line, in the order given, and the blank line that ends it.
    public static func block(_ fields: [Field]) -> [UInt8] {
        var bytes: [UInt8] = []
        for field in fields {
            switch field {
            case .id(let id): bytes += Array("id: \(id)\n".utf8)
            case .event(let type): bytes += Array("event: \(type)\n".utf8)
            case .data(let data):
                for line in data.split(separator: 10, omittingEmptySubsequences: false) {
                    bytes += Array("data: ".utf8) + line + [10]
                }
            case .retry(let milliseconds): bytes += Array("retry: \(milliseconds)\n".utf8)
            case .comment(let text): bytes += Array(": \(text)\n".utf8)
            }
        }
        return bytes + [10]
    }
}
