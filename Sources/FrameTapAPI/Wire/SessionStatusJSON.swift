import Ingest
import Sessions

/// `GET /sessions/{id}` and each entry of `GET /sessions` (openapi.yaml `SessionStatus`).
/// Optional members are `null`, never left out, so clients see one stable shape.
struct SessionStatusJSON: Encodable {
    let status: SessionStatus

    init(_ status: SessionStatus) { self.status = status }

    func encode(to encoder: any Encoder) throws {
        try encoder.encodeObject(Key.self, [
            .id: status.id.rawValue,
            .codec: status.codec?.rawValue,
            .codecStated: status.codecStated,
            .backend: status.backend.rawValue,
            .backendReason: status.backendReason,
            .device: status.device?.description,
            .fallbacks: status.fallbacks.map(BackendFallbackJSON.init),
            .decode: status.decode.rawValue,
            .decoding: status.decoding,
            .decoder: status.decoder.rawValue,
            .quality: status.quality,
            .createdAt: WireJSON.timestamp(status.createdAt),
            .lastActivityAt: WireJSON.timestamp(status.lastActivityAt),
            .format: status.format.map(StreamFormatJSON.init),
            .counters: SessionCountersJSON(status.counters, packetsIgnored: status.ignoredPackets),
            .latestFrame: status.latestFrame.map(LatestFrameJSON.init),
            .lastError: status.lastError.map(ErrorRecordJSON.init),
            .subscribers: status.subscribers,
            .uploading: status.uploading,
            .rates: SessionRatesJSON(status.rates),
            .source: status.source.map(SourceStatusJSON.init),
            .owner: status.owner?.rawValue,
            .origin: status.standing.origin.rawValue,
            .persisted: status.standing.persisted,
        ])
    }

    private enum Key: String, CodingKey {
        case id, codec, codecStated, backend, backendReason, device, fallbacks, decode, decoding, decoder, quality
        case createdAt
        case lastActivityAt, format, counters
        case latestFrame, lastError, subscribers, uploading, rates, source, owner, origin, persisted
    }
}

/// `GET /sessions`.
struct SessionListJSON: Encodable {
    let sessions: [SessionStatus]

    init(_ list: SessionList) { sessions = list.sessions }

    func encode(to encoder: any Encoder) throws {
        try encoder.encodeObject(Key.self, [
            .sessions: sessions.map(SessionStatusJSON.init),
        ])
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
        try encoder.encodeObject(Key.self, [
            .bytes: counters.bytes,
            .nalUnits: counters.nalUnits,
            .accessUnits: counters.accessUnits,
            .framesDecoded: counters.framesDecoded,
            .framesDroppedBeforeKeyframe: counters.framesDroppedBeforeKeyframe,
            .framesSkippedLeading: counters.framesSkippedLeading,
            .framesRejectedTooLarge: counters.framesRejectedTooLarge,
            .framesSkippedNotKeyframe: counters.framesSkippedNotKeyframe,
            .unitsOutsideBaseLayer: counters.unitsOutsideBaseLayer,
            .decodeErrors: counters.decodeErrors,
            .uploadsAborted: counters.uploadsAborted,
            .packetsIgnored: packetsIgnored,
        ])
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
        try encoder.encodeObject(Key.self, [
            .seq: frame.seq,
            .pts: frame.pts,
            .keyframe: frame.keyframe,
            .width: frame.width,
            .height: frame.height,
            .ageMs: frame.ageMs,
        ])
    }

    private enum Key: String, CodingKey { case seq, pts, keyframe, width, height, ageMs }
}

/// A remembered error (a status' `lastError`, a push summary's `error`).
struct ErrorRecordJSON: Encodable {
    let record: ErrorRecord

    init(_ record: ErrorRecord) { self.record = record }

    func encode(to encoder: any Encoder) throws {
        try encoder.encodeObject(Key.self, [
            .code: record.code,
            .message: record.message,
            .at: WireJSON.timestamp(record.at),
        ])
    }

    private enum Key: String, CodingKey { case code, message, at }
}

struct SessionRatesJSON: Encodable {
    let rates: SessionRates

    init(_ rates: SessionRates) { self.rates = rates }

    func encode(to encoder: any Encoder) throws {
        try encoder.encodeObject(Key.self, [
            .picturesPerSecond: rates.picturesPerSecond,
            .bitsPerSecond: rates.bitsPerSecond,
            .windowSeconds: rates.windowSeconds,
        ])
    }

    private enum Key: String, CodingKey { case picturesPerSecond, bitsPerSecond, windowSeconds }
}

/// A pull session's source (openapi.yaml `SourceStatus`): its URL with credentials left out.
struct SourceStatusJSON: Encodable {
    let source: SourceStatus

    init(_ source: SourceStatus) { self.source = source }

    func encode(to encoder: any Encoder) throws {
        try encoder.encodeObject(Key.self, [
            .url: source.url,
            .transport: source.transport?.rawValue,
            .connect: source.connect.rawValue,
            .state: source.state.rawValue,
            .format: source.format,
            .lastError: source.lastError.map(ErrorRecordJSON.init),
            .reconnects: source.reconnects,
            .failures: source.failures,
            .connectedAt: source.connectedAt.map(WireJSON.timestamp),
            .nextAttemptAt: source.nextAttemptAt.map(WireJSON.timestamp),
        ])
    }

    private enum Key: String, CodingKey {
        case url, transport, connect, state, format, lastError, reconnects, failures, connectedAt, nextAttemptAt
    }
}
