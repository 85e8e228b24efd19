import Containers
import Decoding
import FoundationEssentials
import HTTPServer
import Sessions
import VideoCoding

/// The body of `PUT /sessions/{id}` (openapi.yaml `SessionOptions`): a JSON object whose
/// members are all optional; an unknown member, a wrong type or a value out of range is a 400
/// `invalid_parameter` that names it.
struct SessionOptionsJSON: Decodable {
    let options: SessionOptions

    /// The options a body asks for; an empty (or blank) body asks for no change.
    static func parse(_ body: some Collection<UInt8>) throws(HTTPError) -> SessionOptions {
        let data = Data(body)
        if data.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return SessionOptions() }
        do {
            return try JSONDecoder().decode(SessionOptionsJSON.self, from: data).options
        } catch let refusal as Refusal {
            throw .invalidParameter(refusal.detail)
        } catch let refusal as SourceRefusal {
            throw HTTPError(SessionError(refusal.error))
        } catch DecodingError.typeMismatch(_, let context), DecodingError.dataCorrupted(let context) {
            let member = context.codingPath.first?.stringValue
            throw .invalidParameter(
                member.map { "session option '\($0)' is invalid" } ?? "session options must be a JSON object")
        } catch {
            throw .invalidParameter("session options are not valid JSON")
        }
    }

    /// A member the decoder read but cannot take.
    private struct Refusal: Error {
        let detail: String
    }

    /// A source URL FrameTap cannot pull (`invalid_source`).
    private struct SourceRefusal: Error {
        let error: ContainerError
    }

    /// The members of `source`.
    private enum SourceKey: String, CodingKey, CaseIterable {
        case url, transport
    }

    /// `{"url": ..., "transport": "tcp"|"udp"}`, or null (stop pulling).
    private static func source(in container: KeyedDecodingContainer<AnyKey>, key: AnyKey) throws -> PullSourceSpec? {
        if try container.decodeNil(forKey: key) { return nil }
        let members = try container.nestedContainer(keyedBy: AnyKey.self, forKey: key)
        for member in members.allKeys where SourceKey(rawValue: member.stringValue) == nil {
            throw Refusal(detail: "unknown source member '\(member.stringValue)' (a source has url and transport)")
        }
        guard members.contains(AnyKey(stringValue: "url")) else { throw Refusal(detail: "a source needs its url") }
        let url: SourceURL
        do {
            url = try SourceURL(try members.decode(String.self, forKey: AnyKey(stringValue: "url")))
        } catch let error as ContainerError {
            throw SourceRefusal(error: error)
        }
        var transport: SourceTransport?
        if members.contains(AnyKey(stringValue: "transport")) {
            guard let value = SourceTransport(rawValue: try members.decode(String.self, forKey: AnyKey(stringValue: "transport")))
            else { throw Refusal(detail: "source transport must be tcp or udp") }
            transport = value
        }
        if let transport, !url.scheme.transports.contains(transport) {
            let choosing = PullScheme.all.filter { $0.transports.count > 1 }.map(\.name).joined(separator: ", ")
            throw Refusal(
                detail: "\(url.scheme.name) runs over \(url.scheme.transports.map(\.rawValue).joined(separator: " or ")) only; "
                    + "transport chooses for \(choosing)")
        }
        return PullSourceSpec(url: url, transport: transport)
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyKey.self)
        var options = SessionOptions()
        for key in container.allKeys {
            switch key.stringValue {
            case "backend":
                guard let choice = DecoderBackendChoice(rawValue: try container.decode(String.self, forKey: key)) else {
                    throw Refusal(
                        detail: "backend must be \(DecoderBackendChoice.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                options.backend = choice
            case "codec":
                guard let codec = VideoCodec(rawValue: try container.decode(String.self, forKey: key)) else {
                    throw Refusal(detail: "codec must be \(VideoCodec.allCases.map(\.rawValue).joined(separator: " or "))")
                }
                options.codec = codec
            case "decode":
                guard let mode = DecodeMode(rawValue: try container.decode(String.self, forKey: key)) else {
                    throw Refusal(detail: "decode must be \(DecodeMode.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                options.decode = mode
            case "source":
                options.source = .some(try Self.source(in: container, key: key))
            case "quality":
                let value = try container.decode(Int.self, forKey: key)
                guard (1...100).contains(value) else { throw Refusal(detail: "quality must be 1...100") }
                options.quality = value
            default:
                throw Refusal(detail: "unknown session option '\(key.stringValue)'")
            }
        }
        self.options = options
    }
}
