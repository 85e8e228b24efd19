import Containers
import Decoding
import FoundationEssentials
import Ingest
import Sessions
import VideoCoding

/// The state file's contents: each session made by `PUT` with its definition, in a format of its
/// own (versioned, not the API's JSON, which may change on its own terms), framed so that a torn
/// or damaged file is never read as fewer sessions:
///
///     frametap-sessions 1 <length of the body in bytes> <CRC-32 of the body, 8 hex digits>\n
///     {"sessions":{"cam1":{"codec":"h264","source":{"url":"rtsp://...","transport":"tcp","connect":"on-demand"}}}}
///
/// A definition holds what `PUT` said, merged over the `PUT`s before it; a member never said is
/// left out (the server's default then applies, as it does for the session).
enum StoredSessions {
    static let magic = "frametap-sessions"
    static let version = 1

    struct Damage: Error {
        let reason: String
    }

    static func encode(_ definitions: [SessionID: SessionOptions]) -> [UInt8] {
        var sessions: [String: StoredDefinition] = [:]
        for (id, options) in definitions { sessions[id.rawValue] = StoredDefinition(options) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // A dictionary of strings, numbers and nested dictionaries always encodes.
        let body = (try? encoder.encode(File(sessions: sessions))).map { Array($0) } ?? []
        let header = "\(magic) \(version) \(body.count) \(hex(CRC32.checksum(body)))\n"
        return Array(header.utf8) + body
    }

    static func decode(_ bytes: [UInt8]) throws(Damage) -> [SessionID: SessionOptions] {
        guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")), newline <= 128 else {
            throw Damage(reason: "it has no header line")
        }
        let fields = String(decoding: bytes[..<newline], as: UTF8.self).split(separator: " ")
        guard fields.count == 4, fields[0] == magic else { throw Damage(reason: "its header is not FrameTap's") }
        guard let version = Int(fields[1]) else { throw Damage(reason: "its header has no version") }
        guard version == Self.version else {
            throw Damage(reason: "it is of format \(version); this FrameTap reads format \(Self.version)")
        }
        guard let length = Int(fields[2]), let checksum = UInt32(fields[3], radix: 16) else {
            throw Damage(reason: "its header is damaged")
        }
        let body = Array(bytes[(newline + 1)...])
        guard body.count == length else {
            throw Damage(reason: "it holds \(body.count) bytes after its header, not the \(length) it was written with (torn)")
        }
        guard CRC32.checksum(body) == checksum else { throw Damage(reason: "its checksum does not match (damaged)") }
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: Data(body))
        } catch {
            throw Damage(reason: "its body cannot be read: \(error)")
        }
        var definitions: [SessionID: SessionOptions] = [:]
        for (name, stored) in file.sessions {
            let id: SessionID
            do {
                id = try SessionID(name)
            } catch {
                throw Damage(reason: "'\(name)' is no session id")
            }
            do {
                definitions[id] = try stored.options()
            } catch {
                throw Damage(reason: "session \(name): \(error.reason)")
            }
        }
        return definitions
    }

    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }

    private struct File: Codable {
        var sessions: [String: StoredDefinition]
    }
}

/// One definition in the state file: the members `PUT` takes, as their names and values.
struct StoredDefinition: Codable, Equatable {
    struct Source: Codable, Equatable {
        var url: String
        var transport: String?
        /// Absent: `always` (files written before the member existed say nothing).
        var connect: String?
    }

    var backend: String?
    var codec: String?
    var decode: String?
    var quality: Int?
    /// Absent: no pull.
    var source: Source?
    /// Absent: nobody said who keeps it (`SessionOptions.owner`).
    var owner: String?

    init(_ options: SessionOptions) {
        backend = options.backend?.rawValue
        codec = options.codec?.rawValue
        decode = options.decode?.rawValue
        quality = options.quality
        source = options.pulled.map {
            Source(
                url: $0.url.openedText(), transport: $0.transport?.rawValue,
                connect: $0.connect == .always ? nil : $0.connect.rawValue)
        }
        owner = (options.owner ?? nil)?.rawValue
    }

    func options() throws(StoredSessions.Damage) -> SessionOptions {
        func value<Value: RawRepresentable<String>>(_ text: String?, _ member: String) throws(StoredSessions.Damage) -> Value? {
            guard let text else { return nil }
            guard let value = Value(rawValue: text) else { throw StoredSessions.Damage(reason: "\(member) '\(text)' is unknown") }
            return value
        }
        var options = SessionOptions(
            backend: try value(backend, "backend") as DecoderBackendChoice?, codec: try value(codec, "codec") as VideoCodec?,
            decode: try value(decode, "decode") as DecodeMode?, quality: quality)
        if let quality, !(1...100).contains(quality) { throw StoredSessions.Damage(reason: "quality \(quality) is out of range") }
        if let source {
            let transport: SourceTransport? = try value(source.transport, "transport")
            let connect: ConnectMode? = try value(source.connect, "connect")
            let url: SourceURL
            do {
                url = try SourceURL(source.url)
            } catch {
                throw StoredSessions.Damage(reason: "its source URL is refused: \(error.message)")
            }
            options.source = .some(PullSourceSpec(url: url, transport: transport, connect: connect ?? .always))
        }
        if let owner {
            do {
                options.owner = .some(try SessionOwner(owner))
            } catch {
                throw StoredSessions.Damage(reason: "its owner is refused: \(error.message)")
            }
        }
        return options
    }
}

/// CRC-32 (IEEE 802.3, as zlib and PNG compute it).
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }

    static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}
