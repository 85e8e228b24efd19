import Sessions

/// The JSON answer of `POST /sessions/{id}/nalus` (openapi.yaml `PushSummary`): what this
/// request carried and produced; optional members are `null`, never left out.
struct UploadSummaryJSON: Encodable {
    let summary: UploadSummary

    init(_ summary: UploadSummary) { self.summary = summary }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(summary.session.rawValue, forKey: .session)
        try container.encode(summary.bytes, forKey: .bytes)
        try container.encode(summary.nalUnits, forKey: .nalUnits)
        try container.encode(summary.frames, forKey: .frames)
        try container.encode(summary.latestSeq, forKey: .latestSeq)
        try container.encode(summary.format.map(StreamFormatJSON.init), forKey: .format)
        try container.encode(summary.decodeErrors, forKey: .decodeErrors)
        try container.encode(summary.error.map(ErrorRecordJSON.init), forKey: .error)
        try container.encode(summary.flushed, forKey: .flushed)
    }

    private enum Key: String, CodingKey {
        case session, bytes, nalUnits, frames, latestSeq, format, decodeErrors, error, flushed
    }
}
