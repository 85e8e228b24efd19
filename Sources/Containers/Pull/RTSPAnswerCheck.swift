/// What an RTSP camera sends on its control connection, checked and rewritten before
/// libavformat's RTSP demuxer reads it (`SourceRelay` carries the connection). The
/// demuxer acts on three things a camera says, each a place it could be sent elsewhere:
///
/// - a 3xx answer's `Location`: it connects there. The target must be of a scheme the source's
///   may redirect to and allowed by `--allow-sources`; the demuxer is then told the relay's
///   own address (the relay connects to the checked target);
/// - a SETUP answer's `Transport`: over UDP it sends RTP and RTCP to `source=` (or to the
///   address it connected to: here the relay's loopback one). `source=` must be the address
///   FrameTap connected to or an allowed one, and is always written out; only unicast RTP is
///   taken (a multicast answer's `destination=` would be a group anyone names). The header is
///   rewritten with only what the demuxer reads;
/// - an SDP `c=` address (read for multicast only, which is refused): unspecified, the
///   connected address, or an allowed one.
///
/// An SDP of more than `maxMediaSections` streams is refused too: the demuxer sets up every one
/// (over UDP, two sockets each), so a camera could make it open thousands.
///
/// Messages are rewritten in one strict form (status line, header lines, `Content-Length`),
/// so what the demuxer's own, laxer parser reads is what was checked; anything that form
/// cannot say is refused. Interleaved RTP (`$`, channel, length) passes unchanged.
struct RTSPAnswerCheck: SourceRelayCheck {
    /// Where the camera is: the URL FrameTap connected for, and the address it connected to.
    var current: SourceURL
    var connectedAddress: IPAddress
    let policy: SourcePolicy
    /// The relay's own address, which a redirect's Location is rewritten to.
    let relayHost: String
    let relayPort: Int
    /// A redirect that was allowed: the next connection goes there.
    private(set) var redirect: SourceURL?

    static let maxHeadBytes = 64 << 10
    static let maxLineBytes = 4000
    static let maxBodyBytes = 1 << 20
    /// Video, audio, metadata and a back channel are what cameras describe.
    static let maxMediaSections = 16

    private var buffer: [UInt8] = []

    init(current: SourceURL, connectedAddress: IPAddress, policy: SourcePolicy, relayHost: String, relayPort: Int) {
        self.current = current
        self.connectedAddress = connectedAddress
        self.policy = policy
        self.relayHost = relayHost
        self.relayPort = relayPort
    }

    /// The camera's next bytes; returns what the demuxer may read of what is complete so far.
    /// Throws the refusal (`source_not_allowed` for an address, `source_failed` for a message
    /// the strict form cannot say).
    mutating func take(_ bytes: some Collection<UInt8>) throws(ContainerError) -> [UInt8] {
        buffer += bytes
        var output: [UInt8] = []
        var start = 0
        defer { buffer.removeFirst(start) }
        while start < buffer.count {
            if buffer[start] == UInt8(ascii: "$") {
                guard buffer.count - start >= 4 else { break }
                let length = Int(buffer[start + 2]) << 8 | Int(buffer[start + 3])
                guard buffer.count - start >= 4 + length else { break }
                output += buffer[start..<(start + 4 + length)]
                start += 4 + length
                continue
            }
            guard let (message, consumed) = try Self.message(in: buffer[start...]) else { break }
            output += try checked(message)
            start += consumed
        }
        if buffer.count - start > Self.maxHeadBytes + Self.maxBodyBytes {
            throw ContainerError(.sourceFailed, "the RTSP server sent a message larger than FrameTap reads")
        }
        return output
    }

    // MARK: - Framing

    struct Message {
        var firstLine: String
        var headers: [String]
        var body: [UInt8]
        var isResponse: Bool { firstLine.hasPrefix("RTSP/") }
    }

    /// One whole message at the start of `bytes`, and its length; nil when more bytes are needed.
    static func message(in bytes: ArraySlice<UInt8>) throws(ContainerError) -> (Message, Int)? {
        var lines: [String] = []
        var index = bytes.startIndex
        var contentLength: Int?
        while true {
            guard let newline = bytes[index...].firstIndex(of: 0x0A) else {
                guard bytes.endIndex - bytes.startIndex <= maxHeadBytes else {
                    throw ContainerError(.sourceFailed, "the RTSP server sent a head over \(maxHeadBytes) bytes")
                }
                return nil
            }
            var line = bytes[index..<newline]
            if line.last == 0x0D { line = line.dropLast() }
            index = newline + 1
            guard line.count <= maxLineBytes else { throw ContainerError(.sourceFailed, "the RTSP server sent a line over \(maxLineBytes) bytes") }
            // The demuxer drops every CR and stops at a NUL; a line starting with '$' it takes
            // for interleaved data. None has a place in a head.
            guard !line.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }), lines.isEmpty || line.first != UInt8(ascii: "$") else {
                throw ContainerError(.sourceFailed, "the RTSP server sent a line with control characters")
            }
            if line.isEmpty {
                if lines.isEmpty { continue }  // a stray CRLF between messages
                break
            }
            let text = String(decoding: line, as: UTF8.self)
            if !lines.isEmpty, text.lowercased().hasPrefix("content-length:") {
                let value = text.dropFirst("content-length:".count).trimmingSpaces
                guard let length = Int(value), length >= 0, length <= maxBodyBytes, value.allSatisfy(\.isNumber),
                    contentLength == nil || contentLength == length
                else { throw ContainerError(.sourceFailed, "the RTSP server sent a Content-Length FrameTap does not take") }
                contentLength = length
                continue
            }
            lines.append(text)
            guard index - bytes.startIndex <= maxHeadBytes else {
                throw ContainerError(.sourceFailed, "the RTSP server sent a head over \(maxHeadBytes) bytes")
            }
        }
        let length = contentLength ?? 0
        guard bytes.endIndex - index >= length else { return nil }
        let body = Array(bytes[index..<(index + length)])
        return (Message(firstLine: lines[0], headers: Array(lines.dropFirst()), body: body), index + length - bytes.startIndex)
    }

    // MARK: - Checks

    private mutating func checked(_ message: Message) throws(ContainerError) -> [UInt8] {
        var message = message
        var status: Int?
        if message.isResponse {
            let parts = message.firstLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count >= 2, parts[1].count == 3, let code = Int(parts[1]), parts[1].allSatisfy(\.isNumber) else {
                throw ContainerError(.sourceFailed, "the RTSP server's answer has no status code")
            }
            status = code
            message.firstLine = "RTSP/1.0 \(code) \(parts.count > 2 ? parts[2] : "")"
        }
        var headers: [String] = []
        var location: String?
        var transport: String?
        for header in message.headers {
            let lowered = header.lowercased()
            if lowered.hasPrefix("location:") {
                guard location == nil else { throw ContainerError(.sourceFailed, "the RTSP server sent two Locations") }
                location = String(header.dropFirst("location:".count).trimmingSpaces)
            } else if lowered.hasPrefix("transport:") {
                guard transport == nil else { throw ContainerError(.sourceFailed, "the RTSP server sent two Transports") }
                transport = String(header.dropFirst("transport:".count).trimmingSpaces)
            } else {
                headers.append(header)
            }
        }
        if let status, (300..<400).contains(status) {
            guard let location else { throw ContainerError(.sourceFailed, "the RTSP server redirected (\(status)) without a Location") }
            headers.append("Location: \(try redirecting(to: location))")
        }
        // Only an answer's Transport is read (a SETUP's); a request the camera sends keeps none.
        if message.isResponse, let transport { headers.append("Transport: \(try checkedTransport(transport))") }
        try checkSessionDescription(message.body)
        var text = message.firstLine + "\r\n"
        for header in headers { text += header + "\r\n" }
        if !message.body.isEmpty { text += "Content-Length: \(message.body.count)\r\n" }
        text += "\r\n"
        return Array(text.utf8) + message.body
    }

    /// The Location the demuxer is given for an allowed redirect: the relay's address, with the
    /// target's path; the relay connects to the target itself.
    private mutating func redirecting(to location: String) throws(ContainerError) -> String {
        let target: SourceURL
        do {
            target = try current.resolving(location)
        } catch {
            throw ContainerError(.sourceNotAllowed, "the source moved to a URL FrameTap does not pull: \(error.message)")
        }
        guard current.scheme.redirectSchemes.contains(target.scheme.name) else {
            throw ContainerError(.sourceNotAllowed, "redirected to \(target.redacted), which leaves \(current.scheme.name)")
        }
        if let refusal = policy.check(target) {
            throw ContainerError(.sourceNotAllowed, "redirected to \(target.redacted), which is not allowed: \(refusal.message)")
        }
        redirect = target
        return target.openedText(host: relayHost, port: relayPort)
    }

    /// A SETUP answer's transport as the demuxer is given it: unicast RTP over the RTSP
    /// connection, or over UDP to a checked `source`.
    private func checkedTransport(_ value: String) throws(ContainerError) -> String {
        guard !value.contains(",") else {
            throw ContainerError(.sourceFailed, "the RTSP server answered with several transports; FrameTap asked for one")
        }
        var parts = value.split(separator: ";", omittingEmptySubsequences: true).map { $0.trimmingSpaces }
        guard let protocolText = parts.first else { throw ContainerError(.sourceFailed, "the RTSP server's Transport is empty") }
        parts.removeFirst()
        let layers = protocolText.uppercased().split(separator: "/")
        guard layers.count >= 2, layers[0] == "RTP", layers[1] == "AVP", layers.count <= 3 else {
            throw ContainerError(.sourceFailed, "the RTSP server answered with transport \(protocolText.prefix(32)); FrameTap takes RTP/AVP")
        }
        let overTCP = layers.count == 3 && layers[2] == "TCP"
        guard layers.count == 2 || layers[2] == "TCP" || layers[2] == "UDP" else {
            throw ContainerError(.sourceFailed, "the RTSP server answered with transport \(protocolText.prefix(32))")
        }
        var fields: [String: String] = [:]
        for part in parts {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            fields[String(pair[0]).lowercased()] = pair.count > 1 ? String(pair[1]) : ""
        }
        guard fields["multicast"] == nil else {
            throw ContainerError(
                .sourceNotAllowed, "the RTSP server answered with multicast; FrameTap pulls unicast (transport tcp or udp)")
        }
        func range(_ name: String) throws(ContainerError) -> String? {
            guard let text = fields[name] else { return nil }
            let numbers = text.split(separator: "-", omittingEmptySubsequences: false)
            guard (1...2).contains(numbers.count),
                numbers.allSatisfy({ !$0.isEmpty && $0.count <= 5 && $0.allSatisfy(\.isNumber) && Int($0)! <= 65535 })
            else { throw ContainerError(.sourceFailed, "the RTSP server's Transport has a malformed \(name)") }
            return numbers.joined(separator: "-")
        }
        if overTCP {
            return "RTP/AVP/TCP;unicast" + (try range("interleaved").map { ";interleaved=\($0)" } ?? "")
        }
        var source = connectedAddress
        if let named = fields["source"] {
            guard let address = IPAddress(named) else {
                throw ContainerError(.sourceNotAllowed, "the RTSP server names its media source \(named.prefix(64)), not an address")
            }
            guard address.unmapped == connectedAddress.unmapped || policy.allows(address: address.unmapped, for: current.scheme)
            else {
                throw ContainerError(
                    .sourceNotAllowed,
                    "the RTSP server's SETUP answer sends its media from \(address.text), not from the address FrameTap "
                        + "connected to (\(connectedAddress.text)), and --allow-sources does not allow it: use transport tcp, or allow it")
            }
            source = address
        }
        var text = "RTP/AVP/UDP;unicast"
        if let ports = try range("client_port") { text += ";client_port=\(ports)" }
        if let ports = try range("server_port") { text += ";server_port=\(ports)" }
        return text + ";source=\(source.unmapped.text)"
    }

    /// The `c=` lines of a session description (read as libavformat reads them), and how many
    /// streams (`m=`) it describes.
    private func checkSessionDescription(_ body: [UInt8]) throws(ContainerError) {
        guard !body.isEmpty else { return }
        var mediaSections = 0
        for rawLine in body.split(whereSeparator: { $0 == 0x0A || $0 == 0x0D }) {
            let line = rawLine.drop { $0 == 0x20 || $0 == 0x09 }
            if line.starts(with: Array("m=".utf8)) {
                mediaSections += 1
                guard mediaSections <= Self.maxMediaSections else {
                    throw ContainerError(
                        .sourceFailed,
                        "the RTSP server's session description has more than \(Self.maxMediaSections) streams (m=), more than a camera has")
                }
            }
            guard line.starts(with: Array("c=".utf8)) else { continue }
            let words = String(decoding: line.dropFirst(2), as: UTF8.self).split { $0 == " " || $0 == "\t" }
            guard words.count >= 3, words[0] == "IN", words[1] == "IP4" || words[1] == "IP6" else { continue }
            let addressText = words[2].prefix { $0 != "/" }
            guard let address = IPAddress(String(addressText)) else {
                // A name is not read (libavformat takes numeric addresses only), but a short or
                // hex IPv4 form (127.1) it would read as an address.
                if addressText.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == "x" || $0 == "X" || $0 == ":" }) {
                    throw ContainerError(.sourceNotAllowed, "the RTSP server's session description has an address FrameTap does not read: \(addressText.prefix(64))")
                }
                continue
            }
            let unspecified = address.bytes.allSatisfy { $0 == 0 }
            guard unspecified || address.unmapped == connectedAddress.unmapped
                || policy.allows(address: address.unmapped, for: current.scheme)
            else {
                throw ContainerError(
                    .sourceNotAllowed,
                    "the RTSP server's session description names \(address.text) (c=), which is neither the address "
                        + "FrameTap connected to nor allowed by --allow-sources")
            }
        }
    }
}

extension StringProtocol {
    fileprivate var trimmingSpaces: Substring {
        let trimmed = drop { $0 == " " || $0 == "\t" }
        return Substring(trimmed.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
