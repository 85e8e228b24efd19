import FoundationEssentials
import HTTPServer

/// The operator console (Sources/FrameTapAPI/Console, embedded at build time by the
/// EmbedConsole plugin): `GET /` is its page, `GET /console/{file}` its scripts, styles and icon.
///
/// These routes need no token: the files are the same for everyone and hold no data, and the
/// page must load to show its sign-in box; every API call it makes carries the token. Each file
/// is a prepared zero-copy response built once, revalidated by a strong ETag (304), and sent with
/// a strict Content-Security-Policy (no inline script or style, nothing from elsewhere).
enum Console {
    struct Asset: Sendable {
        let name: String
        let contentType: String
        let etag: String
        let response: ReusableResponse
    }

    static let contentSecurityPolicy =
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; "
        + "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    /// Headers every console answer carries, 200 and 304 alike.
    static let commonHeaders: [(String, String)] = [
        // Names are stable and not versioned, so browsers revalidate each time (a 304 when unchanged).
        ("Cache-Control", "no-cache"),
        ("Content-Security-Policy", contentSecurityPolicy),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
    ]

    /// Every embedded file by name, decoded and prepared once (on first use: `register`).
    static let assets: [String: Asset] = {
        var assets: [String: Asset] = [:]
        for (name, base64) in ConsoleFiles.base64 {
            guard let bytes = Data(base64Encoded: base64) else {
                fatalError("console file \(name) is not valid base64; the EmbedConsole plugin wrote it")
            }
            let contentType = contentType(of: name)
            let etag = "\"\(fingerprint(bytes))\""
            var headers = HTTPHeaders([("Content-Type", contentType), ("ETag", etag)])
            for (field, value) in commonHeaders { headers.add(field, value) }
            do {
                let response = try ReusableResponse(headers: headers, body: SharedBytes(Array(bytes)))
                assets[name] = Asset(name: name, contentType: contentType, etag: etag, response: response)
            } catch {
                fatalError("libmicrohttpd cannot build the response for console file \(name): \(error)")
            }
        }
        return assets
    }()

    static func register(in router: inout Router<RoutePermission>) {
        let assets = assets
        guard let page = assets["index.html"] else { fatalError("the console has no index.html") }
        router.get("/", access: .public) { request in answer(page, request) }
        router.get("/console/{file}", access: .public) { request throws(HTTPError) in
            guard let name = request.pathParameters["file"], let asset = assets[name] else {
                throw .notFound("The console has no file \(request.path).")
            }
            return answer(asset, request)
        }
    }

    static func answer(_ asset: Asset, _ request: HTTPRequest) -> HTTPResponse {
        guard request.ifNoneMatch?.matches(asset.etag) == true else { return .reusing(asset.response) }
        var headers = HTTPHeaders([("ETag", asset.etag)])
        for (field, value) in commonHeaders { headers.add(field, value) }
        return HTTPResponse(status: .notModified, headers: headers)
    }

    static func contentType(of name: String) -> String {
        switch name.split(separator: ".").last.map({ $0.lowercased() }) {
        case "html": "text/html; charset=utf-8"
        case "js", "mjs": "text/javascript; charset=utf-8"
        case "css": "text/css; charset=utf-8"
        case "svg": "image/svg+xml"
        case "png": "image/png"
        case "ico": "image/x-icon"
        case "json": "application/json"
        default: "application/octet-stream"
        }
    }

    /// 64-bit FNV-1a of the bytes with their length, as hex: an ETag that changes whenever a file
    /// does (it only has to tell versions of one file apart, not resist anyone).
    static func fingerprint(_ bytes: Data) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return String(hash, radix: 16) + "-" + String(bytes.count, radix: 16)
    }
}
