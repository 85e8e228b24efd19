// libFuzzer target: RequestTarget.parse over any bytes. An accepted target must keep every
// promise the parser makes (no "/" or control character in a segment, no dot or empty
// segment, valid UTF-8), parse the same from bytes and from a String, agree with a naive split
// when nothing needs decoding, and survive re-encoding: encoding the decoded segments and
// pairs again and parsing that gives them back unchanged.

import HTTPServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestTargets(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    let result = Result { () throws(RequestTargetError) in try RequestTarget.parse(input) }

    if let text = String(validating: input, as: UTF8.self) {
        let fromString = Result { () throws(RequestTargetError) in try RequestTarget.parse(text) }
        require(ParsedTarget(fromString) == ParsedTarget(result), "a String and its bytes parse alike")
    }

    switch result {
    case .failure(let error):
        require((0...max(input.count, RequestTarget.maxLength)).contains(error.offset), "the offset is in the target")
        require((error.reason == .tooLong) == (input.count > RequestTarget.maxLength), "only long targets are too long")
        require(!error.message.isEmpty, "every rejection explains itself")
    case .success(let target):
        require(input.count <= RequestTarget.maxLength, "a long target is rejected")
        for segment in target.segments {
            require(!segment.isEmpty && segment != "." && segment != "..", "no empty or dot segment")
            require(!segment.utf8.contains(UInt8(ascii: "/")), "no / inside a segment")
            require(!containsControl(segment), "no control character in a segment")
        }
        for pair in target.query.pairs {
            require(!containsControl(pair.name) && !containsControl(pair.value), "no control character in the query")
        }
        checkNaiveSplitAgrees(input, target)
        let reencoded = encode(target)
        let again = Result { () throws(RequestTargetError) in try RequestTarget.parse(reencoded) }
        if reencoded.utf8.count <= RequestTarget.maxLength {
            require(
                ParsedTarget(again) == ParsedTarget(result),
                "re-encoding \(target.path) gives the same segments and query")
        }
    }
    return 0
}

/// The parts of a result that must match, as one comparable value.
struct ParsedTarget: Equatable {
    var segments: [String]?
    var pairs: [[String]]?
    var error: RequestTargetError?

    init(_ result: Result<RequestTarget, RequestTargetError>) {
        switch result {
        case .success(let target):
            segments = target.segments
            pairs = target.query.pairs.map { [$0.name, $0.value] }
        case .failure(let failure):
            error = failure
        }
    }
}

func containsControl(_ text: String) -> Bool {
    text.utf8.contains { $0 < 0x20 || $0 == 0x7F }
}

/// Where the target needs no decoding at all (ASCII, no %, + or #), splitting on "/", "?", "&"
/// and "=" by hand must give the same parts.
func checkNaiveSplitAgrees(_ input: [UInt8], _ target: RequestTarget) {
    guard input.allSatisfy({ $0 < 0x80 && $0 != UInt8(ascii: "%") && $0 != UInt8(ascii: "+") }) else { return }
    let text = String(decoding: input, as: UTF8.self)
    let path = text.prefix { $0 != "?" }
    let segments = path == "/" ? [] : path.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map(String.init)
    require(segments == target.segments, "segments of \(text) are the naive split")
    guard path.count < text.count else {
        require(target.query.isEmpty, "no query without ?")
        return
    }
    let query = text[text.index(after: path.endIndex)...]
    let pairs = query.split(separator: "&").map { piece -> [String] in
        let name = piece.prefix { $0 != "=" }
        return [String(name), name.count < piece.count ? String(piece[piece.index(after: name.endIndex)...]) : ""]
    }
    require(pairs == target.query.pairs.map { [$0.name, $0.value] }, "query pairs of \(text) are the naive split")
}

/// The target written back with every byte but the unreserved ones percent-encoded.
func encode(_ target: RequestTarget) -> String {
    var out = target.segments.isEmpty ? "/" : ""
    for segment in target.segments { out += "/" + percentEncoded(segment) }
    if !target.query.isEmpty {
        out += "?" + target.query.pairs.map { percentEncoded($0.name) + "=" + percentEncoded($0.value) }.joined(separator: "&")
    }
    return out
}

func percentEncoded(_ text: String) -> String {
    var out = ""
    for byte in text.utf8 {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            out.unicodeScalars.append(Unicode.Scalar(byte))
        default:
            let hex = Array("0123456789ABCDEF".utf8)
            out += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 15)]], as: UTF8.self)
        }
    }
    return out
}
