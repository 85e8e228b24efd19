import Sessions

/// The `data:` of one `GET /events` event: `at`, `session` (left out for `resync`) and the
/// details the event has; details it does not have are left out, not `null`.
struct SessionEventJSON: Encodable {
    let event: SessionEvent

    init(_ event: SessionEvent) { self.event = event }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encodeIfPresent(event.session?.rawValue, forKey: .session)
        try container.encode(WireJSON.timestamp(event.at), forKey: .at)
        let details = event.details
        try container.encodeIfPresent(details.reason, forKey: .reason)
        try container.encodeIfPresent(details.backend, forKey: .backend)
        try container.encodeIfPresent(details.device, forKey: .device)
        try container.encodeIfPresent(details.fallback, forKey: .fallback)
        try container.encodeIfPresent(details.decode, forKey: .decode)
        try container.encodeIfPresent(details.seq, forKey: .seq)
        try container.encodeIfPresent(details.width, forKey: .width)
        try container.encodeIfPresent(details.height, forKey: .height)
        try container.encodeIfPresent(details.format.map(StreamFormatJSON.init), forKey: .format)
        try container.encodeIfPresent(details.code, forKey: .code)
        try container.encodeIfPresent(details.message, forKey: .message)
        try container.encodeIfPresent(details.multipart, forKey: .multipart)
        try container.encodeIfPresent(details.result, forKey: .result)
        try container.encodeIfPresent(details.bytes, forKey: .bytes)
        try container.encodeIfPresent(details.frames, forKey: .frames)
        try container.encodeIfPresent(details.viewers, forKey: .viewers)
        try container.encodeIfPresent(details.waiting, forKey: .waiting)
        try container.encodeIfPresent(details.url, forKey: .url)
        try container.encodeIfPresent(details.reconnects, forKey: .reconnects)
        try container.encodeIfPresent(details.container, forKey: .container)
        try container.encodeIfPresent(details.origin, forKey: .origin)
        try container.encodeIfPresent(details.file, forKey: .file)
        try container.encodeIfPresent(details.line, forKey: .line)
        try container.encodeIfPresent(details.column, forKey: .column)
        try container.encodeIfPresent(details.changes, forKey: .changes)
        try container.encodeIfPresent(details.restartNeeded, forKey: .restartNeeded)
    }

    private enum Key: String, CodingKey {
        case session, at, reason, backend, device, fallback, decode, seq, width, height, format, code, message
        case multipart, result, bytes, frames, viewers, waiting, url, reconnects, container, origin, file, line, column
        case changes, restartNeeded
    }

}
