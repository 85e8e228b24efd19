// libFuzzer target, differential: FrameTap's source URL parser (SourceURL) against
// libavformat's own URL splitting (av_url_split, which its rtsp, rtmp, srt and tcp protocols
// use to find where to connect). For any text SourceURL accepts:
// - libavformat reads the same host and port from the text as given (its port, or none where
//   SourceURL took the scheme's default), through its smallest host buffer (RTMP's 256 bytes);
// - libavformat reads exactly the checked scheme, host, port and path from the URL FrameTap
//   hands it (openedText), and from the redacted form, whose credentials are `***`;
// - the URL handed over reads back as the same parts (one reading, whatever the round).
// Text SourceURL refuses needs nothing: it is never opened.

import CFFmpeg
import Containers

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSourceURLs(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    guard input.count <= 5000, let text = String(validating: input, as: UTF8.self) else { return 0 }
    guard let url = try? SourceURL(text) else { return 0 }

    let given = split(text)
    require(given.host.lowercased() == url.host, "libavformat's host \(given.host) is the checked \(url.host) (in \(text))")
    require(
        given.port == url.port || (given.port == -1 && url.port == url.scheme.defaultPort),
        "libavformat's port \(given.port) is the checked \(url.port) (in \(text))")

    let opened = url.openedText()
    let handed = split(opened)
    require(handed.scheme == url.scheme.name, "the scheme handed over is the checked one (\(opened))")
    require(handed.host == url.host && handed.port == url.port, "the host and port handed over are the checked ones (\(opened))")
    require(handed.path == url.pathAndQuery, "the path handed over is the checked one (\(opened))")
    require(handed.authorization.isEmpty == !url.hasCredentials, "credentials go over exactly when given (\(opened))")

    let shown = split(url.redacted)
    require(shown.host == url.host && shown.port == url.port, "the redacted URL names the same host and port")
    require(shown.authorization == (url.hasCredentials ? "***" : ""), "the redacted URL shows no credentials")

    guard let again = try? SourceURL(opened) else {
        require(false, "the URL handed over is accepted again (\(opened))")
        return 0
    }
    require(again == url, "the URL handed over reads as the same parts (\(opened))")
    return 0
}

/// av_url_split's reading, with the buffer sizes of the protocols that connect: a 256-byte
/// host (RTMP's, the smallest), 1024 bytes of path and 128 of credentials (RTSP's).
func split(_ text: String) -> (scheme: String, authorization: String, host: String, port: Int, path: String) {
    var scheme = [CChar](repeating: 0, count: 32)
    var authorization = [CChar](repeating: 0, count: 4096)
    var host = [CChar](repeating: 0, count: 256)
    var path = [CChar](repeating: 0, count: 8192)
    var port: Int32 = 0
    av_url_split(
        &scheme, Int32(scheme.count), &authorization, Int32(authorization.count), &host, Int32(host.count), &port, &path,
        Int32(path.count), text)
    func string(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
    return (string(scheme), string(authorization), string(host), Int(port), string(path))
}
