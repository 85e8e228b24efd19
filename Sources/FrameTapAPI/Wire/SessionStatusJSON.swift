import Sessions

/// `GET /sessions/{id}` and each entry of `GET /sessions` (openapi.yaml `SessionStatus`).
/// Optional members are `null`, never left out, so clients see one stable shape.
struct SessionStatusJSON: Encodable {
    let status: SessionStatus

    init(_ status: SessionStatus) { self.status = status }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(status.id.rawValue, forKey: .id)
        try container.encode(status.codec?.rawValue, forKey: .codec)
        try container.encode(status.codecStated, forKey: .codecStated)
        try container.encode(status.backend.rawValue, forKey: .backend)
        try container.encode(status.backendReason, forKey: .backendReason)
        try container.encode(status.device?.description, forKey: .device)
        try container.encode(status.fallbacks.map(BackendFallbackJSON.init), forKey: .fallbacks)
        try container.encode(status.decode.rawValue, forKey: .decode)
        try container.encode(status.decoding, forKey: .decoding)
        try container.encode(status.decoder.rawValue, forKey: .decoder)
        try container.encode(status.quality, forKey: .quality)
        try container.encode(WireJSON.timestamp(status.createdAt), forKey: .createdAt)
        try container.encode(WireJSON.timestamp(status.lastActivityAt), forKey: .lastActivityAt)
        try container.encode(status.format.map(StreamFormatJSON.init), forKey: .format)
        try container.encode(SessionCountersJSON(status.counters, packetsIgnored: status.ignoredPackets), forKey: .counters)
        try container.encode(status.latestFrame.map(LatestFrameJSON.init), forKey: .latestFrame)
        try container.encode(status.lastError.map(ErrorRecordJSON.init), forKey: .lastError)
        try container.encode(status.subscribers, forKey: .subscribers)
        try container.encode(status.uploading, forKey: .uploading)
        try container.encode(SessionRatesJSON(status.rates), forKey: .rates)
        try container.encode(status.source.map(SourceStatusJSON.init), forKey: .source)
    }

    private enum Key: String, CodingKey {
        case id, codec, codecStated, backend, backendReason, device, fallbacks, decode, decoding, decoder, quality
        case createdAt
        case lastActivityAt, format, counters
        case latestFrame, lastError, subscribers, uploading, rates, source
    }
}

/// `GET /sessions`.
struct SessionListJSON: Encodable {
    let sessions: [SessionStatus]

    init(_ list: SessionList) { sessions = list.sessions }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(sessions.map(SessionStatusJSON.init), forKey: .sessions)
    }

    private enum Key: String, CodingKey { case sessions }
}

/// A session's counters as one flat object: the decoders' counts and the session's own.
struct SessionCountersJSON: Encodable {
    let counters: SessionCounters
    /// Packets of container tracks other than the video, by kind (`audio`, `data`, ...).
    let packetsIgnored: [String: Int]

    init(_ counters: SessionCounters, packetsIgnored: [String: Int]) {
        self.counters = counters
        self.packetsIgnored = packetsIgnored
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(counters.bytes, forKey: .bytes)
        try container.encode(counters.nalUnits, forKey: .nalUnits)
        try container.encode(counters.accessUnits, forKey: .accessUnits)
        try container.encode(counters.framesDecoded, forKey: .framesDecoded)
        try container.encode(counters.framesDroppedBeforeKeyframe, forKey: .framesDroppedBeforeKeyframe)
        try container.encode(counters.framesSkippedLeading, forKey: .framesSkippedLeading)
        try container.encode(counters.framesRejectedTooLarge, forKey: .framesRejectedTooLarge)
        try container.encode(counters.framesSkippedNotKeyframe, forKey: .framesSkippedNotKeyframe)
        try container.encode(counters.unitsOutsideBaseLayer, forKey: .unitsOutsideBaseLayer)
        try container.encode(counters.decodeErrors, forKey: .decodeErrors)
        try container.encode(counters.uploadsAborted, forKey: .uploadsAborted)
        try container.encode(packetsIgnored, forKey: .packetsIgnored)
    }

    private enum Key: String, CodingKey {
        case bytes, nalUnits, accessUnits, framesDecoded, framesDroppedBeforeKeyframe, framesSkippedLeading
        case framesRejectedTooLarge, framesSkippedNotKeyframe, unitsOutsideBaseLayer, decodeErrors, uploadsAborted
        case packetsIgnored
    }
}

/// The newest picture of a session; `pts` is `null` when the stream has none.
struct LatestFrameJSON: Encodable {
    let frame: LatestFrameInfo

    init(_ frame: LatestFrameInfo) { self.frame = frame }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(frame.seq, forKey: .seq)
        try container.encode(frame.pts, forKey: .pts)
        try container.encode(frame.keyframe, forKey: .keyframe)
        try container.encode(frame.width, forKey: .width)
        try container.encode(frame.height, forKey: .height)
        try container.encode(frame.ageMs, forKey: .ageMs)
    }

    private enum Key: String, CodingKey { case seq, pts, keyframe, width, height, ageMs }
}

/// A remembered error (a status' `lastError`, a push summary's `error`).
struct ErrorRecordJSON: Encodable {
    let record: ErrorRecord

    init(_ record: ErrorRecord) { self.record = record }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(record.code, forKey: .code)
        try container.encode(record.message, forKey: .message)
        try container.encode(WireJSON.timestamp(record.at), forKey: .at)
    }

    private enum Key: String, CodingKey { case code, message, at }
}

struct SessionRatesJSON: Encodable {
    let rates: SessionRates

    init(_ rates: SessionRates) { self.rates = rates }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(rates.picturesPerSecond, forKey: .picturesPerSecond)
        try container.encode(rates.bitsPerSecond, forKey: .bitsPerSecond)
        try container.encode(rates.windowSeconds, forKey: .windowSeconds)
    }

    private enum Key: String, CodingKey { case picturesPerSecond, bitsPerSecond, windowSeconds }
}

/// A pull session's source (openapi.yaml `SourceStatus`): its URL with credentials left out.
struct SourceStatusJSON: Encodable {
    let source: SourceStatus

    init(_ source: SourceStatus) { self.source = source }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(source.url, forKey: .url)
        try container.encode(source.transport?.rawValue, forKey: .transport)
        try container.encode(source.state.rawValue, forKey: .state)
        try container.encode(source.format, forKey: .format)
        try container.encode(source.lastError.map(ErrorRecordJSON.init), forKey: .lastError)
        try container.encode(source.reconnects, forKey: .reconnects)
        try container.encode(source.connectedAt.map(WireJSON.timestamp), forKey: .connectedAt)
        try container.encode(source.nextAttemptAt.map(WireJSON.timestamp), forKey: .nextAttemptAt)
    }

    private enum Key: String, CodingKey {
        case url, transport, state, format, lastError, reconnects, connectedAt, nextAttemptAt
    }
}
