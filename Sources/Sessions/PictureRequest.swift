import Decoding
import Foundation
import H264
import Imaging

/// What a reader asks for. `quality` nil means the session's default quality (settable with `PUT`).
public struct PictureRequest: Sendable, Equatable {
    public var format: PictureFormat
    public var width: Int?
    public var height: Int?
    public var quality: Int?

    public init(format: PictureFormat = .jpeg, width: Int? = nil, height: Int? = nil, quality: Int? = nil) {
        self.format = format
        self.width = width
        self.height = height
        self.quality = quality
    }

    /// Range checks that need no picture (the HTTP layer may call this early to answer 400).
    public func validated() throws(SessionError) -> PictureRequest {
        do {
            _ = try PictureOptions(format: format, width: width, height: height, quality: quality ?? 85).validated()
        } catch {
            throw SessionError(error)
        }
        return self
    }

    func effectiveQuality(sessionDefault: Int) -> Int { quality ?? sessionDefault }
}

/// Entity tags of served pictures: `"<seq>"` for the source size at the standard quality,
/// `"<seq>-w160-h90-q50"` otherwise (only the parts that differ), so every distinct
/// representation of one picture has a distinct tag and a tag's sequence is readable by
/// clients that long-poll with `If-None-Match`.
public enum PictureETag {
    public static func make(sequence: UInt64, request: PictureRequest, effectiveQuality: Int) -> String {
        var tag = "\"\(sequence)"
        if let width = request.width { tag += "-w\(width)" }
        if let height = request.height { tag += "-h\(height)" }
        if request.format == .jpeg, effectiveQuality != PictureOptions.defaultQuality { tag += "-q\(effectiveQuality)" }
        return tag + "\""
    }

    /// The tags listed in an `If-None-Match` value (weak prefixes dropped, quotes kept), and
    /// whether it was `*`.
    public static func parse(ifNoneMatch header: String) -> (tags: [String], wildcard: Bool) {
        var tags: [String] = []
        var wildcard = false
        for item in header.split(separator: ",") {
            var tag = item.trimmingCharacters(in: .whitespaces)
            if tag == "*" { wildcard = true; continue }
            if tag.hasPrefix("W/") { tag = String(tag.dropFirst(2)) }
            if !tag.isEmpty { tags.append(tag) }
        }
        return (tags, wildcard)
    }

    /// The picture sequence a tag names (`"17-w160"` → 17), or nil for a foreign tag.
    public static func sequence(of tag: String) -> UInt64? {
        var body = Substring(tag)
        if body.hasPrefix("W/") { body = body.dropFirst(2) }
        guard body.hasPrefix("\"") else { return nil }
        let digits = body.dropFirst().prefix { $0.isASCII && $0.isNumber }
        return UInt64(digits)
    }
}

/// The options a picture is cached under: the request resolved against the picture's size
/// and the session default, so requests that produce the same bytes share one encode
/// (`?width=W` for a W-wide picture equals no width; quality does not affect raw formats).
struct PictureKey: Hashable, Sendable {
    static let maxUpscale = 2
    let sequence: UInt64
    let format: PictureFormat
    let width: Int
    let height: Int
    let quality: Int

    var encoderOptions: PictureOptions {
        PictureOptions(format: format, width: width, height: height, quality: format == .jpeg ? quality : 85)
    }

    init(
        sequence: UInt64, frame: DecodedFrame, request: PictureRequest, defaultQuality: Int, limit: PictureSizeLimit
    ) throws(SessionError) {
        let size = outputSize(
            sourceWidth: frame.width, sourceHeight: frame.height, width: request.width, height: request.height)
        do {
            try limit.check(width: size.width, height: size.height)
        } catch {
            throw SessionError(.invalidParameter, error.message)
        }
        // Each distinct size is one more scale and encode of up to `limit` pixels: enlarging
        // adds no detail, so it is capped to keep one client from buying that cost repeatedly.
        let maxScale = PictureKey.maxUpscale
        guard size.width <= frame.width * maxScale, size.height <= frame.height * maxScale else {
            throw SessionError(
                .invalidParameter,
                "\(size.width)x\(size.height) enlarges the \(frame.width)x\(frame.height) picture more than \(maxScale)x")
        }
        self.sequence = sequence
        format = request.format
        width = size.width
        height = size.height
        quality = request.format == .jpeg ? request.effectiveQuality(sessionDefault: defaultQuality) : 0
    }
}
