/// The containers a push may carry instead of an Annex B elementary stream, each read by one of
/// libavformat's demuxers.
public enum ContainerFormat: String, Sendable, CaseIterable {
    /// MPEG-TS (`video/mp2t`): 188-byte packets; read with `mpegts`.
    case mpegTS = "mpegts"
    /// MP4 and fragmented MP4 (`video/mp4`, `video/iso.segment`); read with `mov`.
    case mp4
    /// Matroska and WebM (`video/x-matroska`, `video/webm`); read with `matroska`.
    case matroska
    /// FLV (`video/x-flv`), also what RTMP carries; read with `flv`.
    case flv

    /// libavformat's name for the demuxer that reads it (`av_find_input_format`).
    public var demuxerName: String {
        switch self {
        case .mpegTS: "mpegts"
        case .mp4: "mov"
        case .matroska: "matroska"
        case .flv: "flv"
        }
    }

    /// "MPEG-TS", "MP4", for messages.
    public var displayName: String {
        switch self {
        case .mpegTS: "MPEG-TS"
        case .mp4: "MP4"
        case .matroska: "Matroska/WebM"
        case .flv: "FLV"
        }
    }

    /// The media type a push of it is sent with.
    public var mediaType: String {
        switch self {
        case .mpegTS: "video/mp2t"
        case .mp4: "video/mp4"
        case .matroska: "video/x-matroska"
        case .flv: "video/x-flv"
        }
    }

    /// The container a media type names (case-insensitive, parameters ignored), or nil.
    public init?(mediaType: String) {
        switch Self.essence(of: mediaType) {
        case "video/mp2t": self = .mpegTS
        case "video/mp4", "video/iso.segment": self = .mp4
        case "video/x-matroska", "video/webm": self = .matroska
        case "video/x-flv": self = .flv
        default: return nil
        }
    }

    /// The media type without parameters, lower case.
    static func essence(of mediaType: String) -> String {
        let type = mediaType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return String(type.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
            .lowercased()
    }

    /// The box a push begins with when it can only go on with a stream under way: an MP4's
    /// fragment or segment, which needs the `moov` of an earlier push. Nil for anything else (an
    /// `mdat` may begin a whole file whose `moov` is at its end).
    public func continuationBox(_ prefix: ArraySlice<UInt8>) -> String? {
        guard self == .mp4, let box = Sniffer.boxType(prefix), ["moof", "styp", "sidx"].contains(box) else { return nil }
        return box
    }

    /// Whether a push that starts with `prefix` begins a new file of this container rather than
    /// continuing an open one: an MP4's `ftyp`, an EBML header, an FLV header. MPEG-TS has no file
    /// header (packets of a new push continue the stream, as HLS segments do).
    public func startsNewFile(_ prefix: ArraySlice<UInt8>) -> Bool {
        switch self {
        case .mpegTS: false
        case .mp4: Sniffer.boxType(prefix) == "ftyp"
        case .matroska: Sniffer.isEBMLHeader(prefix)
        case .flv: Sniffer.isFLVHeader(prefix)
        }
    }
}

/// What the first bytes of a push that names no container say it is.
public enum SniffedContent: Sendable, Equatable {
    case container(ContainerFormat)
    /// Annex B, or bytes of no known kind (which the Annex B path reports as such).
    case elementaryStream
    /// Too few bytes to tell yet; ask again with more, or with all of them at the push's end.
    case needMoreBytes
}

/// Tells containers from an Annex B stream by their first bytes, as `file(1)` would.
public enum Sniffer {
    /// Bytes that always settle it (an MPEG-TS guess is checked at its second sync byte, or at
    /// its fourth when the bytes begin inside a packet).
    public static let decisiveLength = 188 + 3 * 188

    /// `complete`: `prefix` is the whole push (no more bytes will come to settle it).
    public static func sniff(_ prefix: ArraySlice<UInt8>, complete: Bool) -> SniffedContent {
        guard let first = prefix.first else { return complete ? .elementaryStream : .needMoreBytes }
        if prefix.count < 8 && !complete {
            // An Annex B start code is settled by its first bytes; the rest need 8.
            return prefix.starts(with: [0, 0, 1]) || prefix.starts(with: [0, 0, 0, 1]) ? .elementaryStream : .needMoreBytes
        }
        if isEBMLHeader(prefix) { return .container(.matroska) }
        if isFLVHeader(prefix) { return .container(.flv) }
        if let box = boxType(prefix), mp4Boxes.contains(box) { return .container(.mp4) }
        if first == 0x47 {
            let second = prefix.index(prefix.startIndex, offsetBy: 188, limitedBy: prefix.endIndex)
            guard let second, second < prefix.endIndex else { return complete ? .container(.mpegTS) : .needMoreBytes }
            // A 0x47 that is no packet's start may be a payload byte of MPEG-TS cut inside a packet.
            if prefix[second] == 0x47 { return .container(.mpegTS) }
            return mpegTSCutInsideAPacket(prefix, complete: complete)
        }
        if prefix.starts(with: [0, 0, 1]) || prefix.starts(with: [0, 0, 0, 1]) { return .elementaryStream }
        return mpegTSCutInsideAPacket(prefix, complete: complete)
    }

    /// MPEG-TS whose first bytes are the end of a packet (a recording read from some offset,
    /// a stream joined late): four sync bytes 188 apart from an offset within the first 188.
    /// Four, not two, because Annex B without a start code at its very start (leading garbage)
    /// is arbitrary bytes here: one chance in 2^32 per offset of taking it for MPEG-TS.
    static func mpegTSCutInsideAPacket(_ prefix: ArraySlice<UInt8>, complete: Bool) -> SniffedContent {
        var undecided = false
        for offset in 1..<188 {
            var syncBytes = 0
            var position = prefix.startIndex + offset
            while syncBytes < 4, position < prefix.endIndex, prefix[position] == 0x47 {
                syncBytes += 1
                position += 188
            }
            if syncBytes == 4 { return .container(.mpegTS) }
            if position >= prefix.endIndex { undecided = true }
        }
        return undecided && !complete ? .needMoreBytes : .elementaryStream
    }

    /// Top-level boxes an MP4 or a fragment of one starts with.
    static let mp4Boxes: Set<String> = ["ftyp", "styp", "moov", "moof", "sidx", "free", "skip", "mdat"]

    /// The type of the box `prefix` starts with, when its four characters are letters.
    static func boxType(_ prefix: ArraySlice<UInt8>) -> String? {
        guard prefix.count >= 8 else { return nil }
        let type = prefix.dropFirst(4).prefix(4)
        guard type.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) }) else { return nil }
        return String(decoding: type, as: UTF8.self)
    }

    static func isEBMLHeader(_ prefix: ArraySlice<UInt8>) -> Bool { prefix.starts(with: [0x1A, 0x45, 0xDF, 0xA3]) }

    static func isFLVHeader(_ prefix: ArraySlice<UInt8>) -> Bool { prefix.starts(with: [0x46, 0x4C, 0x56, 0x01]) }
}
