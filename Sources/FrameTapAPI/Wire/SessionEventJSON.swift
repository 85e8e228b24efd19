import Sessions

/// The `data:` of one `GET /events` event: `at`, `session` (left out for `resync`) and the
/// details the event has; details it does not have are left out, not `null`.
struct SessionEventJSON: SparseWireObject {
    let event: SessionEvent

    init(_ event: SessionEvent) { self.event = event }

    var members: KeyValuePairs<String, (any Encodable)?> {
        let details = event.details
        return [
            "session": event.session?.rawValue,
            "at": WireJSON.timestamp(event.at),
            "reason": details.reason,
            "backend": details.backend,
            "device": details.device,
            "fallback": details.fallback,
            "decode": details.decode,
            "seq": details.seq,
            "width": details.width,
            "height": details.height,
            "format": details.format.map(StreamFormatJSON.init),
            "code": details.code,
            "message": details.message,
            "multipart": details.multipart,
            "result": details.result,
            "bytes": details.bytes,
            "frames": details.frames,
            "viewers": details.viewers,
            "waiting": details.waiting,
            "url": details.url,
            "reconnects": details.reconnects,
            "container": details.container,
            "dropped": details.dropped,
            "origin": details.origin,
            "file": details.file,
            "line": details.line,
            "column": details.column,
            "changes": details.changes,
            "restartNeeded": details.restartNeeded,
        ]
    }
}
