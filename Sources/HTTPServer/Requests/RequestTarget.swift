/// The request target of an HTTP request (RFC 9112 §3.2.1, origin form), parsed strictly from the
/// raw bytes the client sent, before anything is percent-decoded.
///
/// Routing on a path that was decoded as a whole is ambiguous: `/sessions/a%2Fframe%2Flatest.jpg`
/// decodes to the path of another route, and `/sessions/victim%00/...` to a session id that a C
/// string ends early. Here every path segment is decoded on its own, and everything that could
/// make two different raw targets route alike is rejected instead of repaired:
///
/// - an encoded `/` (`%2F`, `%2f`) inside a segment;
/// - control characters (0x00-0x1F, 0x7F), raw or percent-encoded (`%00`), anywhere;
/// - malformed escapes (`%zz`, a truncated `%4`) and bytes that are not UTF-8 once decoded;
/// - empty segments (`//`, a trailing `/`): collapsing them would shift every later segment
///   (`/sessions//frames.mjpeg` would name the session `frames.mjpeg`), so only the root `/` has
///   no segment;
/// - dot segments `.` and `..`, also encoded (`%2E%2E`): clients and proxies normalise them
///   away, so a server that sees one sees a path nobody meant;
/// - an unreserved character (`A-Z a-z 0-9 - . _ ~`) percent-encoded in the path (`%41` for
///   `A`): RFC 3986 makes `/sessions/cam%41` and `/sessions/camA` the same resource, but a
///   proxy that routes on the raw path (HAProxy's `path`) sends them to different places, so one
///   name would reach two sessions;
/// - anything but origin form (no leading `/`: `*`, `http://host/...`, `host:port`), a fragment
///   (`#` never travels in a request), and targets longer than `maxLength` bytes.
///
/// Other bytes are taken as they are: clients such as curl send `|`, `{`, `"` or raw UTF-8
/// unencoded, and none of them can change how a target splits.
///
/// The query is split on `&` into `name=value` pairs (a piece without `=` has the value "",
/// empty pieces are skipped), `+` stands for a space, and each name and value is decoded on its
/// own with the same control-character, escape and UTF-8 rules; an encoded `/` is fine there.
/// Pairs keep their order and duplicates, as `QueryParameters` always did (first one wins in a
/// lookup), so it can replace libmicrohttpd's decoded arguments as is.
public struct RequestTarget: Sendable {
    /// Longest target accepted, in raw (still encoded) bytes, path and query together.
    public static let maxLength = 8 * 1024

    /// The path segments, each percent-decoded on its own; empty for `/`.
    public let segments: [String]
    /// The decoded query pairs, in order; empty when there is no query.
    public let query: QueryParameters

    /// The decoded path, for logs and messages only: joining the segments again is lossless
    /// only because an encoded `/` is rejected, and routing should use `segments` anyway.
    public var path: String { "/" + segments.joined(separator: "/") }

    /// What to do with a `.` or `..` segment (also percent-encoded).
    public enum DotSegments: Sendable {
        /// Reject the target: clients and proxies that normalise paths would address something else.
        case reject
        /// Keep them as ordinary segments, for a router that accepts them only as values of a
        /// route parameter (which its handler validates) and rejects them anywhere else.
        case keep
    }

    public static func parse(_ target: String, dotSegments: DotSegments = .reject) throws(RequestTargetError)
        -> RequestTarget
    {
        if let parsed = target.utf8.withContiguousStorageIfAvailable({ bytes in
            Result { () throws(RequestTargetError) in try parse(bytes, dotSegments: dotSegments) }
        }) {
            return try parsed.get()
        }
        return try parse(Array(target.utf8), dotSegments: dotSegments)
    }

    /// The target as the client sent it, e.g. libmicrohttpd's request line bytes.
    public static func parse(_ target: some Collection<UInt8>, dotSegments: DotSegments = .reject)
        throws(RequestTargetError) -> RequestTarget
    {
        if let parsed = target.withContiguousStorageIfAvailable({ bytes in
            Result { () throws(RequestTargetError) in try parse(bytes, dotSegments: dotSegments) }
        }) {
            return try parsed.get()
        }
        return try parse(Array(target), dotSegments: dotSegments)
    }

    public static func parse(_ raw: UnsafeBufferPointer<UInt8>, dotSegments: DotSegments = .reject)
        throws(RequestTargetError) -> RequestTarget
    {
        guard raw.count <= maxLength else { throw RequestTargetError(.tooLong, at: maxLength) }
        guard raw.first == slash else { throw RequestTargetError(.notOriginForm, at: 0) }
        // The decoded form of a piece is never longer than the piece, so one scratch buffer
        // as long as the target serves every piece in turn; it is on the stack when small.
        return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: raw.count) {
            (scratch) throws(RequestTargetError) -> RequestTarget in
            let decoder = PieceDecoder(raw: raw, scratch: scratch, rejectDotSegments: dotSegments == .reject)
            var pathEnd = 1
            var slashes = 0
            while pathEnd < raw.count && raw[pathEnd] != questionMark {
                if raw[pathEnd] == slash { slashes += 1 }
                pathEnd += 1
            }
            var segments: [String] = []
            if pathEnd > 1 {
                segments.reserveCapacity(slashes + 1)
                var start = 1
                while start <= pathEnd {
                    var end = start
                    while end < pathEnd && raw[end] != slash { end += 1 }
                    guard end > start else { throw RequestTargetError(.emptySegment, at: start) }
                    segments.append(try decoder.decode(start..<end, as: .pathSegment))
                    start = end + 1
                }
            }
            guard pathEnd < raw.count else { return RequestTarget(segments: segments, query: QueryParameters()) }

            var pieces = 1
            for index in (pathEnd + 1)..<raw.count where raw[index] == ampersand { pieces += 1 }
            var pairs: [(String, String)] = []
            pairs.reserveCapacity(pieces)
            var start = pathEnd + 1
            while start < raw.count {
                var end = start
                var equals: Int?
                while end < raw.count && raw[end] != ampersand {
                    if equals == nil && raw[end] == equalsSign { equals = end }
                    end += 1
                }
                if end > start {
                    let nameEnd = equals ?? end
                    let name = try decoder.decode(start..<nameEnd, as: .queryComponent)
                    let value = equals.map { $0 + 1 } ?? end
                    pairs.append((name, try decoder.decode(value..<end, as: .queryComponent)))
                }
                start = end + 1
            }
            return RequestTarget(segments: segments, query: QueryParameters(pairs))
        }
    }

    private init(segments: [String], query: QueryParameters) {
        self.segments = segments
        self.query = query
    }
}

/// Why a request target was rejected. Every reason but `tooLong` is answered the same way, a 400
/// problem with the code `invalid_request_target` (e.g. `HTTPError(status: .badRequest, code:
/// error.code, detail: error.message, extensions: ["reason": error.reason.rawValue])`), so
/// clients need to know one code; `reason` names the rule for people and logs. A target that is
/// only too long is 414 `request_target_too_long` at the server's edge.
public struct RequestTargetError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable, snake_case: never rename a raw value.
    public enum Reason: String, Sendable, CaseIterable {
        case tooLong = "target_too_long"
        case notOriginForm = "not_origin_form"
        case fragment = "fragment"
        case invalidPercentEncoding = "invalid_percent_encoding"
        case encodedSlash = "encoded_slash"
        case controlCharacter = "control_character"
        case invalidUTF8 = "invalid_utf8"
        case emptySegment = "empty_segment"
        case dotSegment = "dot_segment"
        case encodedUnreserved = "encoded_unreserved"
    }

    /// The problem code of every rejection.
    public static let code = "invalid_request_target"

    public let reason: Reason
    /// Byte offset in the raw target of what broke the rule (of the segment or query component
    /// for `invalidUTF8` and `dotSegment`; `maxLength` for `tooLong`).
    public let offset: Int

    public init(_ reason: Reason, at offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    public var code: String { Self.code }

    /// Built on demand, so that rejecting a request costs no string work until someone reads it.
    public var message: String {
        switch reason {
        case .tooLong:
            "The request target is longer than \(RequestTarget.maxLength) bytes."
        case .notOriginForm:
            "The request target must be a path that starts with \"/\" (origin form)."
        case .fragment:
            "The request target contains a fragment (\"#\" at byte \(offset))."
        case .invalidPercentEncoding:
            "\"%\" at byte \(offset) of the request target is not followed by two hexadecimal digits."
        case .encodedSlash:
            "An encoded \"/\" (%2F) at byte \(offset) of the path is not accepted inside a path segment."
        case .controlCharacter:
            "The request target contains a control character, raw or percent-encoded, at byte \(offset)."
        case .invalidUTF8:
            "The path segment or query component at byte \(offset) is not valid UTF-8 once percent-decoded."
        case .emptySegment:
            "The path has an empty segment at byte \(offset) (\"//\" or a trailing \"/\")."
        case .dotSegment:
            "The path has a \".\" or \"..\" segment at byte \(offset) (also when percent-encoded)."
        case .encodedUnreserved:
            "The path has a percent-encoded letter, digit or one of - . _ ~ at byte \(offset): send it as it is."
        }
    }

    public var description: String { "\(code) (\(reason.rawValue)): \(message)" }
}

private let slash = UInt8(ascii: "/")
private let questionMark = UInt8(ascii: "?")
private let ampersand = UInt8(ascii: "&")
private let equalsSign = UInt8(ascii: "=")
private let percent = UInt8(ascii: "%")
private let plus = UInt8(ascii: "+")
private let hash = UInt8(ascii: "#")
private let dot = UInt8(ascii: ".")

/// Decodes one segment or query component of the raw target into a `String`.
private struct PieceDecoder {
    enum Kind {
        case pathSegment
        case queryComponent
    }

    let raw: UnsafeBufferPointer<UInt8>
    let scratch: UnsafeMutableBufferPointer<UInt8>
    let rejectDotSegments: Bool

    func decode(_ range: Range<Int>, as kind: Kind) throws(RequestTargetError) -> String {
        var written = 0
        var index = range.lowerBound
        var changed = false
        var allASCII = true
        var encodedUnreserved: Int?
        while index < range.upperBound {
            var byte = raw[index]
            var width = 1
            if byte == percent {
                guard index + 2 < range.upperBound, let high = Self.hexValue(raw[index + 1]),
                    let low = Self.hexValue(raw[index + 2])
                else { throw RequestTargetError(.invalidPercentEncoding, at: index) }
                byte = high << 4 | low
                width = 3
                changed = true
                if kind == .pathSegment {
                    if byte == slash { throw RequestTargetError(.encodedSlash, at: index) }
                    if encodedUnreserved == nil && Self.isUnreserved(byte) { encodedUnreserved = index }
                }
            } else if byte == plus && kind == .queryComponent {
                byte = UInt8(ascii: " ")
                changed = true
            } else if byte == hash {
                throw RequestTargetError(.fragment, at: index)
            }
            if byte < 0x20 || byte == 0x7F { throw RequestTargetError(.controlCharacter, at: index) }
            if byte >= 0x80 { allASCII = false }
            scratch[written] = byte
            written += 1
            index += width
        }
        let decoded = changed
            ? UnsafeBufferPointer(rebasing: scratch[0..<written]) : UnsafeBufferPointer(rebasing: raw[range])
        // An encoded dot segment (`%2E%2E`) is a dot segment first, whichever way those are taken.
        if kind == .pathSegment, decoded.count <= 2, decoded.allSatisfy({ $0 == dot }) {
            if rejectDotSegments { throw RequestTargetError(.dotSegment, at: range.lowerBound) }
        } else if let encodedUnreserved {
            throw RequestTargetError(.encodedUnreserved, at: encodedUnreserved)
        }
        // ASCII is valid UTF-8, and the non-validating initialiser is the fast one.
        if allASCII { return String(decoding: decoded, as: UTF8.self) }
        guard let text = String(validating: decoded, as: UTF8.self) else {
            throw RequestTargetError(.invalidUTF8, at: range.lowerBound)
        }
        return text
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), dot, UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    @inline(__always)
    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte &- UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte &- UInt8(ascii: "A") &+ 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte &- UInt8(ascii: "a") &+ 10
        default: nil
        }
    }
}
