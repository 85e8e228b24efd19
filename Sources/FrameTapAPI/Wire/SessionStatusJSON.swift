import Imaging
import Ingest
import Sessions

/// `GET /sessions/{id}` and each entry of `GET /sessions` (openapi.yaml `SessionStatus`).
/// Optional members are `null`, never left out, so clients see one stable shape.
struct SessionStatusJSON: WireObject {
    let status: SessionStatus

    init(_ status: SessionStatus) { self.status = status }

    var members: KeyValuePairs<String, any Encodable> {
        [
            "id": status.id.rawValue,
            "codec": status.codec?.rawValue,
            "codecStated": status.codecStated,
            "statedCodec": status.statedCodec?.rawValue,
            "backend": status.backend.rawValue,
            "backendReason": status.backendReason,
            "encoder": PictureEncoderJSON(status.encoder),
            "device": status.device?.description,
            "fallbacks": status.fallbacks.map(BackendFallbackJSON.init),
            "decode": status.decode.rawValue,
            "decoding": status.decoding,
            "decoder": status.decoder.rawValue,
            "quality": status.quality,
            "createdAt": WireJSON.timestamp(status.createdAt),
            "lastActivityAt": WireJSON.timestamp(status.lastActivityAt),
            "format": status.format.map(StreamFormatJSON.init),
            "counters": SessionCountersJSON(status.counters, packetsIgnored: status.ignoredPackets),
            "latestFrame": status.latestFrame.map(LatestFrameJSON.init),
            "lastError": status.lastError.map(ErrorRecordJSON.init),
            "subscribers": status.subscribers,
            "uploading": status.uploading,
            "heldBy": status.hold?.kind,
            "publisher": status.publisher,
            "rates": SessionRatesJSON(status.rates),
            "source": status.source.map(SourceStatusJSON.init),
            "owner": status.owner?.rawValue,
            "origin": status.standing.origin.rawValue,
            "persisted": status.standing.persisted,
        ]
    }
}

/// `GET /sessions`.
struct SessionListJSON: WireObject {
    let sessions: [SessionStatus]

    init(_ list: SessionList) { sessions = list.sessions }

    var members: KeyValuePairs<String, any Encodable> {
        [
            "sessions": sessions.map(SessionStatusJSON.init),
        ]
    }
}

/// A session's counters as one flat object: the decoders' counts and the session's own.
struct SessionCountersJSON: WireObject {
    let counters: SessionCounters
    /// Packets of container tracks other than the video, by kind (`audio`, `data`, ...).
    let packetsIgnored: [String: Int]

    init(_ counters: SessionCounters, packetsIgnored: [String: Int]) {
        self.counters = counters
        self.packetsIgnored = packetsIgnored
    }

    var members: KeyValuePairs<String, any Encodable> {
        [
            "bytes": counters.bytes,
            "nalUnits": counters.nalUnits,
            "accessUnits": counters.accessUnits,
            "framesDecoded": counters.framesDecoded,
            "framesDroppedBeforeKeyframe": counters.framesDroppedBeforeKeyframe,
            "framesSkippedLeading": counters.framesSkippedLeading,
            "framesRejectedTooLarge": counters.framesRejectedTooLarge,
            "framesSkippedNotKeyframe": counters.framesSkippedNotKeyframe,
            "unitsOutsideBaseLayer": counters.unitsOutsideBaseLayer,
            "decodeErrors": counters.decodeErrors,
            "uploadsAborted": counters.uploadsAborted,
            "uploadsTakenOver": counters.uploadsTakenOver,
            "packetsIgnored": packetsIgnored,
        ]
    }
}

/// The newest picture of a session; `pts` is `null` when the stream has none.
struct LatestFrameJSON: WireObject {
    let frame: LatestFrameInfo

    init(_ frame: LatestFrameInfo) { self.frame = frame }

    var members: KeyValuePairs<String, any Encodable> {
        [
            "seq": frame.seq,
            "pts": frame.pts,
            "keyframe": frame.keyframe,
            "width": frame.width,
            "height": frame.height,
            "ageMs": frame.ageMs,
        ]
    }
}

/// A remembered error (a status' `lastError`, a push summary's `error`).
struct ErrorRecordJSON: WireObject {
    let record: ErrorRecord

    init(_ record: ErrorRecord) { self.record = record }

    var members: KeyValuePairs<String, any Encodable> {
        [
            "code": record.code,
            "message": record.message,
            "at": WireJSON.timestamp(record.at),
        ]
    }
}

struct SessionRatesJSON: WireObject {
    let rates: SessionRates

    init(_ rates: SessionRates) { self.rates = rates }

    var members: KeyValuePairs<String, any Encodable> {
        [
            "picturesPerSecond": rates.picturesPerSecond,
            "bitsPerSecond": rates.bitsPerSecond,
            "windowSeconds": rates.windowSeconds,
        ]
    }
}

/// A pull session's source (openapi.yaml `SourceStatus`): its URL with credentials left out.
struct SourceStatusJSON: WireObject {
    let source: SourceStatus

    init(_ source: SourceStatus) { self.source = source }

    var members: KeyValuePairs<String, any Encodable> {
        [
            "url": source.url,
            "transport": source.transport?.rawValue,
            "connect": source.connect.rawValue,
            "state": source.state.rawValue,
            "format": source.format,
            "lastError": source.lastError.map(ErrorRecordJSON.init),
            "reconnects": source.reconnects,
            "failures": source.failures,
            "connectedAt": source.connectedAt.map(WireJSON.timestamp),
            "nextAttemptAt": source.nextAttemptAt.map(WireJSON.timestamp),
        ]
    }
}
