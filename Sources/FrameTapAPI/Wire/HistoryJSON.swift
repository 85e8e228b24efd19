import Sessions

/// `GET /sessions/{id}/history` (openapi.yaml `History`): what the session's compressed
/// history holds. Members without a value (nothing held yet) are `null`.
struct HistoryJSON: Encodable {
    let summary: HistorySummary

    init(_ summary: HistorySummary) { self.summary = summary }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(summary.from.map(WireJSON.timestamp), forKey: .from)
        try container.encode(summary.to.map(WireJSON.timestamp), forKey: .to)
        let seconds = summary.from.flatMap { from in summary.to.map { $0.timeIntervalSince(from) } }
        try container.encode(seconds.map { ($0 * 1000).rounded() / 1000 }, forKey: .seconds)
        try container.encode(summary.gops, forKey: .gops)
        try container.encode(summary.accessUnits, forKey: .accessUnits)
        try container.encode(summary.bytes, forKey: .bytes)
        try container.encode(summary.memoryBytes, forKey: .memoryBytes)
        try container.encode(summary.firstSeq, forKey: .firstSeq)
        try container.encode(summary.lastSeq, forKey: .lastSeq)
        try container.encode(summary.gopsDropped, forKey: .gopsDropped)
        try container.encode(summary.gopsShed, forKey: .gopsShed)
        var limits = container.nestedContainer(keyedBy: LimitKey.self, forKey: .limits)
        try limits.encode(summary.limitSeconds, forKey: .seconds)
        try limits.encode(summary.limitBytes, forKey: .bytes)
    }

    private enum Key: String, CodingKey {
        case from, to, seconds, gops, accessUnits, bytes, memoryBytes, firstSeq, lastSeq, gopsDropped, gopsShed, limits
    }

    private enum LimitKey: String, CodingKey { case seconds, bytes }
}
