import CMicroHTTPD

/// A header line libmicrohttpd 0.9.75 takes in some reading of its own, where RFC 9112 asks a
/// server to refuse the request: two parsers reading one head two ways is how requests are
/// smuggled past a proxy. Each is answered 400 `invalid_header`, with the reason.
enum HeaderDefect: Sendable, Equatable {
    /// A line folded onto the previous one (obs-fold, RFC 9112 §5.2), or a header line that
    /// starts with whitespace. libmicrohttpd appends the continuation to the field's *name*
    /// (`Transfer-Encoding:\r\n chunked` becomes a field named "Transfer-Encodingchunked"), so
    /// the field silently disappears.
    case obsFold(name: String)
    /// Whitespace between a field name and its colon (RFC 9112 §5.1): libmicrohttpd keeps it in
    /// the name, so `Transfer-Encoding : chunked` is not Transfer-Encoding to it.
    case whitespaceBeforeColon(name: String)
    /// A name with characters a field name cannot have (RFC 9110 §5.1: a token).
    case invalidName(name: String)
    /// A control character in a value (RFC 9110 §5.5 allows visible characters, space and
    /// horizontal tab). A NUL is the sharp case: libmicrohttpd hands over the value up to it,
    /// so `Authorization: Bearer <token>\0junk` read as `Bearer <token>`.
    case controlCharacter(name: String)

    var reason: String {
        switch self {
        case .obsFold: "obs_fold"
        case .whitespaceBeforeColon: "whitespace_before_colon"
        case .invalidName: "invalid_name"
        case .controlCharacter: "control_character"
        }
    }

    var detail: String {
        switch self {
        case .obsFold(let name):
            "A header line continues the line before it or starts with whitespace (obs-fold is not accepted); "
                + "it was read as a field named '\(name)'."
        case .whitespaceBeforeColon(let name):
            "The header name '\(name)' is followed by whitespace before its colon."
        case .invalidName(let name):
            "'\(name)' is not a header name (a token: letters, digits and !#$%&'*+-.^_`|~)."
        case .controlCharacter(let name):
            "The value of header '\(name)' contains a control character (NUL, CR, LF or another below 0x20, or DEL)."
        }
    }
}

/// The request head as libmicrohttpd parsed it: its header fields, and the ways of writing them
/// it would have misread (`HeaderDefect`).
///
/// libmicrohttpd parses the head in place, in its connection's read buffer: every line end and
/// every header's colon becomes NUL, and each field it hands over points into the buffer (its
/// name at the start of its line, its value after the colon and any spaces). Two things never
/// reach a field's name or value, and can only be seen from where they lie:
/// - a folded line: libmicrohttpd copies the field's name out of the head to append the
///   continuation to it, so that name lies outside the head's bytes;
/// - what follows a NUL inside a value: the value ends at the NUL, so the next field does not
///   start right after its line end (or, for the last field, the head does not end there).
enum RequestHead {
    /// Reads the header fields, duplicates included, in order. `method` is the access handler's
    /// `method` argument: where the head begins in the read buffer.
    static func read(_ connection: OpaquePointer, method: UnsafePointer<CChar>?) -> (HTTPHeaders, HeaderDefect?) {
        var fields: [Field] = []
        withUnsafeMutablePointer(to: &fields) { pointer in
            _ = MHD_get_connection_values_n(connection, MHD_ValueKind.HEADER_KIND, collectField, pointer)
        }
        let headers = HTTPHeaders(fields.map { ($0.nameText, $0.valueText) })
        let headSize = ft_mhd_request_head_size(connection)
        let head = method.flatMap { headSize > 0 ? UnsafeRawBufferPointer(start: $0, count: headSize) : nil }
        return (headers, defect(in: fields, head: head))
    }

    /// One field as libmicrohttpd handed it over: where its name and value lie, and their text.
    struct Field {
        let name: UnsafeRawBufferPointer
        let value: UnsafeRawBufferPointer
        var nameText: String { String(decoding: name, as: UTF8.self) }
        var valueText: String { String(decoding: value, as: UTF8.self) }
    }

    static func defect(in fields: [Field], head: UnsafeRawBufferPointer?) -> HeaderDefect? {
        for field in fields {
            if let defect = nameDefect(field.name) { return defect }
        }
        // Where a field has no value pointer, there is nothing to tell from places.
        if let head, fields.allSatisfy({ $0.value.baseAddress != nil }) {
            for field in fields where !isInPlace(field, in: head) {
                return .obsFold(name: printable(field.name))
            }
            for (index, field) in fields.enumerated() {
                let valueEnd = address(field.value.baseAddress) + UInt(field.value.count)
                let followed: Bool
                if index + 1 < fields.count {
                    // The line ends with CR LF or a bare LF, both NUL by now; the next line is the next field.
                    let next = address(fields[index + 1].name.baseAddress)
                    followed = next == valueEnd + 1 || next == valueEnd + 2
                } else {
                    // After the last field only its line end and the blank line are left: NULs, to the end.
                    let headEnd = address(head.baseAddress) + UInt(head.count)
                    followed = valueEnd < headEnd && headEnd - valueEnd <= 4
                        && head[Int(valueEnd - address(head.baseAddress))...].allSatisfy { $0 == 0 }
                }
                if !followed { return .controlCharacter(name: printable(field.name)) }
            }
        }
        for field in fields where field.value.contains(where: isControlCharacter) {
            return .controlCharacter(name: printable(field.name))
        }
        return nil
    }

    /// The field's name lies in the head, at the start of its line, followed by its colon (NUL
    /// now), optional spaces and tabs, and its value.
    private static func isInPlace(_ field: Field, in head: UnsafeRawBufferPointer) -> Bool {
        let start = address(head.baseAddress)
        let end = start + UInt(head.count)
        let name = address(field.name.baseAddress)
        let value = address(field.value.baseAddress)
        let colon = name + UInt(field.name.count)
        guard name >= start, colon < value, value + UInt(field.value.count) <= end else { return false }
        let between = head[Int(colon - start)..<Int(value - start)]
        return between.first == 0 && between.dropFirst().allSatisfy { $0 == space || $0 == tab }
    }

    private static func nameDefect(_ name: UnsafeRawBufferPointer) -> HeaderDefect? {
        if name.first == space || name.first == tab { return .obsFold(name: printable(name)) }
        if name.last == space || name.last == tab { return .whitespaceBeforeColon(name: printable(name)) }
        if name.isEmpty || !name.allSatisfy(isTokenCharacter) { return .invalidName(name: printable(name)) }
        return nil
    }

    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            tokenPunctuation.contains(byte)
        }
    }

    private static func isControlCharacter(_ byte: UInt8) -> Bool {
        (byte < 0x20 && byte != tab) || byte == 0x7F
    }

    /// A name for a problem's detail: at most 64 characters, control characters and quotes as `?`.
    private static func printable(_ name: UnsafeRawBufferPointer) -> String {
        String(decoding: name.prefix(64).map { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "'") ? UInt8(ascii: "?") : $0 }, as: UTF8.self)
    }

    private static func address(_ pointer: UnsafeRawPointer?) -> UInt { UInt(bitPattern: pointer) }

    private static let space = UInt8(ascii: " ")
    private static let tab = UInt8(ascii: "\t")
    private static let tokenPunctuation = Array("!#$%&'*+-.^_`|~".utf8)
}

private let collectField: MHD_KeyValueIteratorN = { cls, _, key, keyLength, value, valueLength in
    guard let cls, let key else { return MHD_Result.YES }
    let fields = cls.assumingMemoryBound(to: [RequestHead.Field].self)
    fields.pointee.append(
        RequestHead.Field(
            name: UnsafeRawBufferPointer(start: key, count: keyLength),
            value: UnsafeRawBufferPointer(start: value, count: value == nil ? 0 : valueLength)))
    return MHD_Result.YES
}
