import Containers
import Decoding
import FoundationEssentials
import HTTPServer
import Ingest
import Sessions
import VideoCoding

/// The body of `PUT /sessions/{id}` (openapi.yaml `SessionOptions`): a JSON object whose
/// members are all optional; an unknown member, a wrong type or a value out of range is a 400
/// `invalid_parameter` that names it. The configuration file's `sessions:` entries are the same
/// object in YAML, read by this decoder too (through ServeOptions' `YAMLNodeDecoder`), so both
/// take the same.
/// It is written by `frametap sync` too (`encode(to:)`): the members the options give, and only
/// those, so the server changes nothing else.
public struct SessionOptionsJSON: Codable {
    public let options: SessionOptions

    public init(_ options: SessionOptions) { self.options = options }

    /// The options a body asks for; an empty (or blank) body asks for no change.
    static func parse(_ body: some Collection<UInt8>) throws(HTTPError) -> SessionOptions {
        let data = Data(body)
        if data.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return SessionOptions() }
        do {
            return try JSONDecoder().decode(SessionOptionsJSON.self, from: data).options
        } catch let refusal as Refusal {
            if let error = refusal.sourceError { throw HTTPError(SessionError(error)) }
            throw .invalidParameter(refusal.detail)
        } catch DecodingError.typeMismatch(let type, let context) {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw .invalidParameter(
                path.isEmpty
                    ? "session options must be a JSON object"
                    : "session option '\(path)' must be \(Self.kind(of: type))")
        } catch DecodingError.valueNotFound(_, let context) {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw .invalidParameter("session option '\(path)' must not be null (leave it out to keep it as it is)")
        } catch DecodingError.dataCorrupted(let context) {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw .invalidParameter(
                path.isEmpty ? "session options are not valid JSON" : "session option '\(path)' is invalid")
        } catch {
            throw .invalidParameter("session options are not valid JSON")
        }
    }

    /// What a member of `type` is, in JSON's words.
    private static func kind(of type: Any.Type) -> String {
        if type == String.self { return "a string" }
        if type == Bool.self { return "true or false" }
        if type is any BinaryInteger.Type { return "a whole number, without quotes" }
        if type is any BinaryFloatingPoint.Type { return "a number" }
        return "an object (such as {\"url\": \"rtsp://...\"})"
    }

    /// A member the decoder read but cannot take, and where it is in the body.
    public struct Refusal: Error {
        public let detail: String
        /// The member's path from the body's top, e.g. `["source", "transport"]`.
        public let path: [String]
        /// For an unknown member: the members its object may have.
        public let knownMembers: [String]
        /// A source URL FrameTap cannot pull: answered with its own code (`invalid_source`).
        let sourceError: ContainerError?

        init(_ detail: String, at path: [any CodingKey], knownMembers: [String] = [], sourceError: ContainerError? = nil) {
            self.detail = detail
            self.path = path.map(\.stringValue)
            self.knownMembers = knownMembers
            self.sourceError = sourceError
        }
    }

    /// The members of the body.
    private enum Member: String, CaseIterable {
        case backend, codec, decode, source, quality, owner
    }

    /// The members of `source`.
    private enum SourceKey: String, CodingKey, CaseIterable {
        case url, transport, connect
    }

    /// `{"url": ..., "transport": "tcp"|"udp", "connect": "always"|"on-demand"}`, or null (stop pulling).
    private static func source(in container: KeyedDecodingContainer<AnyKey>, key: AnyKey) throws -> PullSourceSpec? {
        if try container.decodeNil(forKey: key) { return nil }
        let members = try container.nestedContainer(keyedBy: AnyKey.self, forKey: key)
        for member in members.allKeys where SourceKey(rawValue: member.stringValue) == nil {
            throw Refusal(
                "unknown source member '\(member.stringValue)' (a source has url, transport and connect)",
                at: members.codingPath + [member], knownMembers: SourceKey.allCases.map(\.rawValue))
        }
        let urlKey = AnyKey(stringValue: "url")
        guard members.contains(urlKey) else { throw Refusal("a source needs its url", at: members.codingPath) }
        let url: SourceURL
        do {
            url = try SourceURL(try members.decode(String.self, forKey: urlKey))
        } catch let error as ContainerError {
            throw Refusal(error.message, at: members.codingPath + [urlKey], sourceError: error)
        }
        var transport: SourceTransport?
        let transportKey = AnyKey(stringValue: "transport")
        if members.contains(transportKey) {
            guard let value = SourceTransport(rawValue: try members.decode(String.self, forKey: transportKey))
            else { throw Refusal("source transport must be tcp or udp", at: members.codingPath + [transportKey]) }
            transport = value
        }
        if let transport, !url.scheme.transports.contains(transport) {
            let choosing = PullScheme.all.filter { $0.transports.count > 1 }.map(\.name).joined(separator: ", ")
            throw Refusal(
                "\(url.scheme.name) runs over \(url.scheme.transports.map(\.rawValue).joined(separator: " or ")) only; "
                    + "transport chooses for \(choosing)",
                at: members.codingPath + [transportKey])
        }
        var connect = ConnectMode.always
        let connectKey = AnyKey(stringValue: "connect")
        if members.contains(connectKey) {
            guard let value = ConnectMode(rawValue: try members.decode(String.self, forKey: connectKey)) else {
                throw Refusal(
                    "source connect must be \(ConnectMode.allCases.map(\.rawValue).joined(separator: " or "))",
                    at: members.codingPath + [connectKey])
            }
            connect = value
        }
        return PullSourceSpec(url: url, transport: transport, connect: connect)
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyKey.self)
        var options = SessionOptions()
        for key in container.allKeys {
            let at = container.codingPath + [key]
            guard let member = Member(rawValue: key.stringValue) else {
                throw Refusal(
                    "unknown session option '\(key.stringValue)'", at: at, knownMembers: Member.allCases.map(\.rawValue))
            }
            switch member {
            case .backend:
                guard let choice = DecoderBackendChoice(rawValue: try container.decode(String.self, forKey: key)) else {
                    throw Refusal(
                        "backend must be \(DecoderBackendChoice.allCases.map(\.rawValue).joined(separator: ", "))", at: at)
                }
                options.backend = choice
            case .codec:
                guard let codec = VideoCodec(rawValue: try container.decode(String.self, forKey: key)) else {
                    throw Refusal("codec must be \(VideoCodec.allCases.map(\.rawValue).joined(separator: " or "))", at: at)
                }
                options.codec = codec
            case .decode:
                guard let mode = DecodeMode(rawValue: try container.decode(String.self, forKey: key)) else {
                    throw Refusal("decode must be \(DecodeMode.allCases.map(\.rawValue).joined(separator: ", "))", at: at)
                }
                options.decode = mode
            case .source:
                options.source = .some(try Self.source(in: container, key: key))
            case .quality:
                let value = try container.decode(Int.self, forKey: key)
                guard (1...100).contains(value) else { throw Refusal("quality must be 1...100", at: at) }
                options.quality = value
            case .owner:
                if try container.decodeNil(forKey: key) {
                    options.owner = .some(nil)
                } else {
                    do {
                        options.owner = try SessionOwner(try container.decode(String.self, forKey: key))
                    } catch let error as SessionError {
                        throw Refusal(error.message, at: at)
                    }
                }
            }
        }
        self.options = options
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: AnyKey.self)
        func key(_ member: Member) -> AnyKey { AnyKey(stringValue: member.rawValue) }
        if let backend = options.backend { try container.encode(backend.rawValue, forKey: key(.backend)) }
        if let codec = options.codec { try container.encode(codec.rawValue, forKey: key(.codec)) }
        if let decode = options.decode { try container.encode(decode.rawValue, forKey: key(.decode)) }
        if let quality = options.quality { try container.encode(quality, forKey: key(.quality)) }
        switch options.source {
        case .some(.some(let spec)):
            var source = container.nestedContainer(keyedBy: SourceKey.self, forKey: key(.source))
            try source.encode(spec.url.openedText(), forKey: .url)
            try source.encodeIfPresent(spec.transport?.rawValue, forKey: .transport)
            // The default is left out, so a server that predates the member reads the rest.
            if spec.connect != .always { try source.encode(spec.connect.rawValue, forKey: .connect) }
        case .some(.none): try container.encodeNil(forKey: key(.source))
        case .none: break
        }
        switch options.owner {
        case .some(.some(let owner)): try container.encode(owner.rawValue, forKey: key(.owner))
        case .some(.none): try container.encodeNil(forKey: key(.owner))
        case .none: break
        }
    }
}
