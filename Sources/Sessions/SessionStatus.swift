import Decoding
import FoundationEssentials
import H264
import VideoCoding

/// Which pictures a session decodes.
public enum DecodeMode: String, Sendable, Codable, CaseIterable {
    case all
    /// Only random-access pictures (IDR / recovery point); the rest are skipped before the
    /// decoder, which makes a high-rate thumbnail session far cheaper.
    case keyframes
}

/// The body of `PUT /sessions/{id}`: every member optional, unknown members rejected.
public struct SessionOptions: Sendable, Equatable {
    public var backend: DecoderBackendChoice?
    public var decode: DecodeMode?
    public var quality: Int?

    public init(backend: DecoderBackendChoice? = nil, decode: DecodeMode? = nil, quality: Int? = nil) {
        self.backend = backend
        self.decode = decode
        self.quality = quality
    }

    /// Parses a JSON object body; an empty body means "no change".
    public init(json: some Collection<UInt8>) throws(SessionError) {
        let data = Data(json)
        if data.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            self.init()
            return
        }
        do {
            self = try JSONDecoder().decode(SessionOptions.self, from: data)
        } catch let error as SessionError {
            throw error
        } catch DecodingError.typeMismatch(_, let context), DecodingError.dataCorrupted(let context) {
            let member = context.codingPath.first?.stringValue
            throw SessionError(
                .invalidParameter,
                member.map { "session option '\($0)' is invalid" } ?? "session options must be a JSON object")
        } catch {
            throw SessionError(.invalidParameter, "session options are not valid JSON")
        }
    }
}

extension SessionOptions: Decodable {
    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyKey.self)
        self.init()
        for key in container.allKeys {
            switch key.stringValue {
            case "backend":
                guard let choice = DecoderBackendChoice(rawValue: try container.decode(String.self, forKey: key)) else {
                    throw SessionError(
                        .invalidParameter,
                        "backend must be \(DecoderBackendChoice.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                backend = choice
            case "decode":
                guard let mode = DecodeMode(rawValue: try container.decode(String.self, forKey: key)) else {
                    throw SessionError(.invalidParameter, "decode must be all or keyframes")
                }
                decode = mode
            case "quality":
                let value = try container.decode(Int.self, forKey: key)
                guard (1...100).contains(value) else {
                    throw SessionError(.invalidParameter, "quality must be 1...100")
                }
                quality = value
            default:
                throw SessionError(.invalidParameter, "unknown session option '\(key.stringValue)'")
            }
        }
    }
}

/// Stream counters since the session was created (they survive flushes and backend changes):
/// the decoders' own counts, read through as if they were this struct's members, plus what only
/// a session knows. Encodes flat, as the `counters` member of the status JSON.
@dynamicMemberLookup
public struct SessionCounters: Sendable, Equatable, Encodable {
    /// What the session's decoders counted, summed over any it replaced.
    public var stream = StreamDecoder.Counters()
    /// Uploads whose client went away before the body ended.
    public var uploadsAborted = 0

    public init() {}

    public subscript<Value>(dynamicMember path: WritableKeyPath<StreamDecoder.Counters, Value>) -> Value {
        get { stream[keyPath: path] }
        set { stream[keyPath: path] = newValue }
    }

    public func encode(to encoder: any Encoder) throws {
        try stream.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(uploadsAborted, forKey: .uploadsAborted)
    }

    private enum CodingKeys: String, CodingKey { case uploadsAborted }
}

/// An error remembered for the status page.
public struct ErrorRecord: Sendable, Equatable, Encodable {
    public var code: String
    public var message: String
    public var at: Date

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(code, forKey: .code)
        try container.encode(message, forKey: .message)
        try container.encode(ISO8601.string(at), forKey: .at)
    }

    private enum CodingKeys: String, CodingKey { case code, message, at }
}

public struct LatestFrameInfo: Sendable, Equatable, Encodable {
    public var seq: UInt64
    public var pts: Int64?
    public var keyframe: Bool
    public var width: Int
    public var height: Int
    public var ageMs: Int

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(seq, forKey: .seq)
        try container.encode(pts, forKey: .pts)  // explicit null: the member is always present
        try container.encode(keyframe, forKey: .keyframe)
        try container.encode(width, forKey: .width)
        try container.encode(height, forKey: .height)
        try container.encode(ageMs, forKey: .ageMs)
    }

    private enum CodingKeys: String, CodingKey { case seq, pts, keyframe, width, height, ageMs }
}

/// `GET /sessions/{id}`. Optional members are encoded as `null`, never left out, so clients
/// see one stable shape.
public struct SessionStatus: Sendable, Encodable {
    public var id: SessionID
    public var backend: DecoderBackend
    public var backendReason: String
    /// The hardware device decoding now (`cuda:0`, `/dev/dri/renderD128`); nil in software.
    public var device: HardwareDeviceID?
    /// The latest switches to another back end, oldest first.
    public var fallbacks: [BackendFallback]
    public var decode: DecodeMode
    public var quality: Int
    public var createdAt: Date
    public var lastActivityAt: Date
    public var format: StreamFormat?
    public var counters: SessionCounters
    public var latestFrame: LatestFrameInfo?
    public var lastError: ErrorRecord?
    public var subscribers: Int
    public var uploading: Bool
    /// Pictures and bits per second coming in, over the last few seconds.
    public var rates: SessionRates

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(backend.rawValue, forKey: .backend)
        try container.encode(backendReason, forKey: .backendReason)
        try container.encode(device?.description, forKey: .device)
        try container.encode(fallbacks, forKey: .fallbacks)
        try container.encode(decode, forKey: .decode)
        try container.encode(quality, forKey: .quality)
        try container.encode(ISO8601.string(createdAt), forKey: .createdAt)
        try container.encode(ISO8601.string(lastActivityAt), forKey: .lastActivityAt)
        try container.encode(format, forKey: .format)
        try container.encode(counters, forKey: .counters)
        try container.encode(latestFrame, forKey: .latestFrame)
        try container.encode(lastError, forKey: .lastError)
        try container.encode(subscribers, forKey: .subscribers)
        try container.encode(uploading, forKey: .uploading)
        try container.encode(rates, forKey: .rates)
    }

    private enum CodingKeys: String, CodingKey {
        case id, backend, backendReason, device, fallbacks, decode, quality, createdAt, lastActivityAt, format, counters
        case latestFrame
        case lastError, subscribers, uploading, rates
    }

    /// Compact UTF-8 JSON.
    public func json() -> [UInt8] { StatusJSON.encode(self) }
}

/// What one upload request carried and produced (the JSON answer of `POST .../nalus`).
public struct UploadSummary: Sendable, Encodable {
    public var session: SessionID
    public var bytes: Int
    public var nalUnits: [String: Int]
    /// Pictures output while handling this request.
    public var frames: Int
    public var latestSeq: UInt64?
    public var format: StreamFormat?
    /// Decode errors during this request; the first one is in `error`.
    public var decodeErrors: Int
    public var error: ErrorRecord?
    public var flushed: Bool

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(session, forKey: .session)
        try container.encode(bytes, forKey: .bytes)
        try container.encode(nalUnits, forKey: .nalUnits)
        try container.encode(frames, forKey: .frames)
        try container.encode(latestSeq, forKey: .latestSeq)
        try container.encode(format, forKey: .format)
        try container.encode(decodeErrors, forKey: .decodeErrors)
        try container.encode(error, forKey: .error)
        try container.encode(flushed, forKey: .flushed)
    }

    private enum CodingKeys: String, CodingKey {
        case session, bytes, nalUnits, frames, latestSeq, format, decodeErrors, error, flushed
    }

    public func json() -> [UInt8] { StatusJSON.encode(self) }
}

/// `GET /sessions`.
public struct SessionList: Sendable, Encodable {
    public var sessions: [SessionStatus]
    public func json() -> [UInt8] { StatusJSON.encode(self) }
}

enum StatusJSON {
    static func encode(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Every member is a plain string, number, bool, object or null: encoding cannot fail.
        return Array((try? encoder.encode(value)) ?? Data("{}".utf8))
    }
}

enum ISO8601 {
    static func string(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
