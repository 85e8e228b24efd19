/// The checks HTTP/1.1 (RFC 9112) asks of a server before it reads a request's body, which
/// libmicrohttpd 0.9.75 does not make (it reads `Content-Length` + `Transfer-Encoding` as
/// chunked, lets the first of two `Content-Length`s win, reads an unknown transfer coding until
/// the connection closes, accepts HTTP/1.1 without `Host`, and takes folded lines, whitespace
/// before a colon and a NUL in a value in readings of its own, see `HeaderDefect`). A request
/// that fails one is answered with a problem and its connection closed, so nothing after it on
/// that connection (a smuggled second request) is ever read.
enum RequestEdge {
    static func check(version: String, headers: HTTPHeaders, defect: HeaderDefect? = nil) -> HTTPError? {
        if let defect {
            return HTTPError(
                status: .badRequest, code: "invalid_header", detail: defect.detail, headers: ["Connection": "close"],
                extensions: ["reason": .text(defect.reason)])
        }
        let hosts = headers.values("Host")
        if version == "HTTP/1.1" && hosts.isEmpty {
            return problem(.badRequest, "missing_host", "An HTTP/1.1 request needs a Host header.")
        }
        if hosts.count > 1 {
            return problem(.badRequest, "invalid_host", "A request has one Host header, not \(hosts.count).")
        }
        if let host = hosts.first, !isValidHost(host, required: version == "HTTP/1.1") {
            return problem(.badRequest, "invalid_host", "Host '\(host.prefix(64))' is not a host name or address with an optional port.")
        }
        // libmicrohttpd sends "100 Continue" for exactly this expectation (in any case) and
        // ignores every other one, so a client expecting something else would wait in vain.
        for expectation in headers.values("Expect") where expectation.lowercased() != "100-continue" {
            return problem(
                HTTPStatus(417), "expectation_failed",
                "The only expectation this server meets is '100-continue', not '\(expectation.prefix(64))'.")
        }
        let encodings = headers.values("Transfer-Encoding")
        let lengths = headers.values("Content-Length")
        if !encodings.isEmpty {
            if !lengths.isEmpty {
                return problem(
                    .badRequest, "ambiguous_length",
                    "Content-Length and Transfer-Encoding together make the body's length ambiguous.")
            }
            // Exactly as libmicrohttpd compares it: one field whose whole value is "chunked" in
            // any case. Anything else, "chunked " with a trailing space included, it reads as no
            // coding it knows, until the connection closes; taking it as chunked here would
            // give the body two lengths.
            if encodings.count != 1 || encodings[0].lowercased() != "chunked" {
                return problem(
                    HTTPStatus(501), "unsupported_transfer_encoding",
                    "Only 'Transfer-Encoding: chunked' is supported (that one coding, with nothing around it), "
                        + "not '\(encodings.joined(separator: ", ").prefix(64))'.")
            }
            return nil
        }
        guard let first = lengths.first else { return nil }
        if !isValidLength(first) {
            return malformedLength(first)
        }
        if lengths.count > 1 {
            return problem(.badRequest, "invalid_content_length", "A request has one Content-Length, not \(lengths.count).")
        }
        if let length = UInt64(first), length > UInt64(Int.max) {
            // libmicrohttpd reads 2^64-1 as "length unknown" and every other length as it is,
            // but a request's length must fit an Int to be checked against any body limit.
            return HTTPError(
                status: .contentTooLarge, code: "body_too_large",
                detail: "A Content-Length of \(first) bytes is more than this server can take (at most \(Int.max)).",
                headers: ["Connection": "close"], extensions: ["max_body_bytes": .integer(Int64(Int.max))])
        }
        return nil
    }

    /// libmicrohttpd stopped reading a chunked body whose framing broke.
    static func malformedChunk() -> HTTPError {
        problem(
            .badRequest, "invalid_chunked_encoding",
            "The chunked body is malformed (a chunk size that is not hexadecimal or too large, or a chunk not ended by CRLF); "
                + "nothing after the fault was read.")
    }

    static func malformedLength(_ value: String) -> HTTPError {
        problem(.badRequest, "invalid_content_length", "Content-Length '\(value)' is not a length.")
    }

    /// RFC 9112 §3.2: `uri-host [ ":" port ]`, empty only where Host is optional (HTTP/1.0). The
    /// characters of a reg-name (unreserved, sub-delims, percent-encoding) or a bracketed IPv6
    /// literal; no spaces, no second colon outside brackets, a port of digits.
    static func isValidHost(_ host: String, required: Bool) -> Bool {
        let bytes = Array(host.utf8)
        if bytes.isEmpty { return !required }
        var name = bytes[...]
        var port: ArraySlice<UInt8> = []
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return false }
            let literal = bytes[1..<close]
            guard !literal.isEmpty, literal.allSatisfy({ isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") })
            else { return false }
            let rest = bytes[(close + 1)...]
            if let colon = rest.first {
                guard colon == UInt8(ascii: ":") else { return false }
                port = rest.dropFirst()
            }
            name = []
        } else if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
            name = bytes[..<colon]
            port = bytes[(colon + 1)...]
            guard !name.isEmpty else { return false }
        }
        let nameCharacters = Array("-._~!$&'()*+,;=%".utf8)
        guard name.allSatisfy({ isAlphanumeric($0) || nameCharacters.contains($0) }) else { return false }
        return port.count <= 5 && port.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        isAlphanumeric(byte) && (byte <= UInt8(ascii: "9") || (byte | 0x20) <= UInt8(ascii: "f"))
    }

    /// Digits only, and within what libmicrohttpd reads as a 64-bit length.
    static func isValidLength(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
            && UInt64(text) != nil
    }

    private static func problem(_ status: HTTPStatus, _ code: String, _ detail: String) -> HTTPError {
        HTTPError(status: status, code: code, detail: detail, headers: ["Connection": "close"])
    }
}

extension RequestTargetError {
    /// The 400 answer: one code for every way a target can be malformed, `reason` says which.
    /// A target that is merely too long is 414 `request_target_too_long` instead: nothing is
    /// wrong with it but its size.
    var problem: HTTPError {
        if reason == .tooLong {
            return HTTPError(
                status: HTTPStatus(414), code: "request_target_too_long", detail: message,
                headers: ["Connection": "close"])
        }
        return HTTPError(
            status: .badRequest, code: code, detail: message, headers: ["Connection": "close"],
            extensions: ["reason": .text(reason.rawValue)])
    }
}
