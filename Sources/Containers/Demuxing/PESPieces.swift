/// MPEG-TS PES packets that libavformat handed on in pieces, joined back into the access unit
/// each PES carries.
///
/// libavformat's MPEG-TS demuxer collects a video PES of unbounded length in a 200 KiB buffer
/// (`MAX_PES_PAYLOAD` in mpegts.c). When the buffer would overflow, it hands on what it has as a
/// packet with the PES's timestamp and goes on in a new buffer; each later piece comes without a
/// timestamp and with the position of the PES's first TS packet. A keyframe over 200 KiB (a 4K
/// IDR, or a 1080p one at a high bit rate) arrives so; taken as access units, the pieces would
/// cut its NAL units apart.
///
/// A piece that may have filled the buffer is held, and the pieces after it at its position
/// join it; anything else hands the held piece on as it was. Only those pieces wait: a PES that
/// ends below the buffer's size goes on at once, so a picture is never held for the next one.
/// A PES whose size falls in the last TS packet's worth of the buffer by chance waits for the
/// next packet.
struct PESPieces {
    /// libavformat's buffer for a PES of unbounded length.
    static let bufferBytes = 200 * 1024
    /// A TS packet carries at most 184 bytes of payload, so a piece cut because the next TS
    /// packet would not fit is at most this much short of the buffer.
    static let tsPayloadBytes = 184

    /// What one piece made.
    enum Step {
        /// Access units now whole, in stream order (none while a piece is held).
        case samples([DemuxedSample])
        /// The joined PES passed `maxBytes`.
        case tooLarge
    }

    let maxBytes: Int
    private var held: (position: Int64, sample: DemuxedSample)?

    init(maxBytes: Int) { self.maxBytes = maxBytes }

    /// `position`: the packet's position (`AVPacket.pos`, -1 when unknown); `hasTimestamp`:
    /// its pts is set. A piece's own size decides whether it may have filled the buffer.
    mutating func take(_ piece: DemuxedSample, position: Int64, hasTimestamp: Bool) -> Step {
        let mayContinue = position >= 0 && Self.mayHaveFilledTheBuffer(piece.payload.count)
        if var joined = held, !hasTimestamp, position == joined.position {
            guard joined.sample.payload.count + piece.payload.count <= maxBytes else {
                held = nil
                return .tooLarge
            }
            joined.sample.payload.append(contentsOf: piece.payload)
            joined.sample.isKeyframe = joined.sample.isKeyframe || piece.isKeyframe
            if mayContinue {
                held = joined
                return .samples([])
            }
            held = nil
            return .samples([joined.sample])
        }
        var whole: [DemuxedSample] = []
        if let previous = held { whole.append(previous.sample) }
        held = nil
        if mayContinue {
            held = (position, piece)
        } else {
            whole.append(piece)
        }
        return .samples(whole)
    }

    /// The input ended: the held piece is all there is of its PES.
    mutating func finish() -> DemuxedSample? {
        defer { held = nil }
        return held?.sample
    }

    static func mayHaveFilledTheBuffer(_ count: Int) -> Bool {
        count > bufferBytes - tsPayloadBytes && count <= bufferBytes
    }
}
