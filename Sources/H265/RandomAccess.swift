/// Which pictures a decoder that starts somewhere in a stream can decode, and which it must
/// skip (§8.1.3, §8.3.1, §C.5.2.2): nothing before the first IRAP picture, whose references are
/// missing, and none of the RASL pictures of an IRAP with NoRaslOutputFlag (a CRA that starts
/// decoding, the first CRA after an end of sequence, every BLA), which refer to pictures
/// before it. RADL pictures refer only to their IRAP and what follows, so they are decoded.
///
/// libavcodec skips those RASL pictures itself (it outputs nothing for them), so a layer that
/// feeds it may as well not send them and count them here. Where libavcodec differs: it
/// decodes pictures before the first IRAP against references it invents (this type judges
/// them `skipBeforeRandomAccessPoint`; `ElementaryStreamReader` passes them on when it
/// emulates the ffmpeg CLI), and a BLA's RASL pictures in the middle of a stream (this type
/// skips them; the spec says they are not output).
public struct RandomAccess: Sendable {
    public enum Verdict: Sendable, Equatable {
        /// Decodable (also every access unit without a picture: its parameter sets and SEI matter).
        case decode
        /// No IRAP picture since the stream (or its coded video sequence) began.
        case skipBeforeRandomAccessPoint
        /// A RASL picture of an IRAP with NoRaslOutputFlag.
        case skipRASL
    }

    /// Pictures judged `skipBeforeRandomAccessPoint`.
    public private(set) var skippedBeforeRandomAccessPoint = 0
    /// Pictures judged `skipRASL`.
    public private(set) var skippedRASL = 0

    /// An IRAP picture has started the current coded video sequence.
    private var started = false
    /// NoRaslOutputFlag of the last IRAP picture, which the RASL pictures after it belong to.
    private var skippingRASL = false

    public init() {}

    /// Judges the next access unit in decoding order.
    public mutating func verdict(for unit: AccessUnit) -> Verdict {
        // An end of sequence makes the next picture the first of a new coded video sequence.
        defer { if unit.endsSequence { started = false } }
        guard let type = unit.pictureType else { return .decode }
        if type.isIRAP {
            skippingRASL = type.isIDR || type.isBLA || !started
            started = true
            return .decode
        }
        guard started else {
            skippedBeforeRandomAccessPoint += 1
            return .skipBeforeRandomAccessPoint
        }
        if type.isRASL && skippingRASL {
            skippedRASL += 1
            return .skipRASL
        }
        return .decode
    }

    /// A new stream: decoding starts again at its first IRAP picture. The counts keep running.
    public mutating func restart() {
        started = false
    }
}
