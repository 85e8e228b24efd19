import FoundationEssentials
import Timekeeping

/// FrameTap's JSON as it leaves the process: HTTP bodies, the `data:` of server-sent events and
/// the CLI's `--json`, all from one encoder configuration.
///
/// The domain layers (Sessions, Decoding, H264) hand out plain values; each published shape is a
/// mirror in this folder (`SessionStatusJSON`, `HardwareReportJSON`, ...) that writes one value
/// member by member. Mirrors rather than retroactive `Encodable` conformances: a conformance
/// would make the domain type encodable for every importer of FrameTapAPI (and clash the day its
/// own module conformed), while a mirror is named where it is used, and it is the one place that
/// says which members are always present (a `WireObject`: `null` when absent) and which are
/// left out (its own `encode(to:)`).
public enum WireJSON {
    /// A new encoder with FrameTap's settings (JSONEncoder is a class: one per use, never shared).
    ///
    /// - Keys sorted: what every client has seen so far, and a stable diff for people.
    /// - Slashes unescaped: device paths (`/dev/dri/renderD128`) read as they are written.
    /// - `indented`: for people (the CLI); HTTP bodies and event data are compact, one line.
    public static func encoder(indented: Bool = false) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if indented { encoder.outputFormatting.insert(.prettyPrinted) }
        return encoder
    }

    /// Compact UTF-8 JSON of a mirror. Mirrors write strings, numbers, booleans, objects and
    /// nulls only, so encoding cannot fail; `{}` stands in should it ever.
    public static func bytes(_ value: some Encodable) -> [UInt8] {
        Array((try? encoder().encode(value)) ?? Data("{}".utf8))
    }

    /// A timestamp as published: ISO 8601 in UTC with milliseconds (`2026-01-01T00:00:00.125Z`).
    static func timestamp(_ date: Date) -> String {
        UTCTime(date).iso8601
    }
}

/// A published object whose members are always there: each written with `encode`, never
/// `encodeIfPresent`, so a nil value comes out as an explicit `null` (openapi.yaml lists them
/// as required and nullable). A mirror lists its members once, by their published names; one
/// that leaves members out, or nests a container, writes its own `encode(to:)` instead.
public protocol WireObject: Encodable {
    var members: KeyValuePairs<String, any Encodable> { get }
}

extension WireObject {
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: MemberName.self)
        for (name, value) in members { try container.encode(value, forKey: MemberName(name)) }
    }
}

/// A published object whose members without a value are left out, not `null` (an event's
/// details: each kind of event has its own few).
public protocol SparseWireObject: Encodable {
    var members: KeyValuePairs<String, (any Encodable)?> { get }
}

extension SparseWireObject {
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: MemberName.self)
        for case let (name, value?) in members { try container.encode(value, forKey: MemberName(name)) }
    }
}

/// A member of a published object, by its name (for objects whose names are data too, like
/// `frametap probe --json`'s parameter set fields).
public struct MemberName: CodingKey {
    public let stringValue: String
    public var intValue: Int? { nil }

    public init(_ name: String) { stringValue = name }
    public init(stringValue: String) { self.init(stringValue) }
    public init?(intValue: Int) { nil }
}
