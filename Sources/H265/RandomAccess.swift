/// Which pictures a decoder that starts somewhere in a stream can decode, and which it must
/// skip (§8.1.3, §8.3.1, §C.5.2.2): nothing before the first IRAP picture or recovery point
/// (§D.3.8), whose references are missing, and none of the RASL pictures of an IRAP with
/// NoRaslOutputFlag (a CRA that starts decoding, the first CRA after an end of sequence, every
/// BLA), which refer to pictures before it. RADL pictures refer only to their IRAP and what follows, so they are decoded.
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

    /// An IRAP picture or a recovery point has started the current coded video sequence.
    private var started = false
    /// An IRAP picture has come since then: the RASL pictures of the first one are skipped even
    /// after a recovery point (as libavcodec skips them).
    private var sawIRAP = false
    /// NoRaslOutputFlag of the last IRAP picture, which the RASL pictures after it belong to.
    private var skippingRASL = false

    public init() {}

    /// Judges the next access unit in decoding order. `atRecoveryPoint`: it carries a recovery
    /// point SEI, from which decoding can start too (its first pictures may be hidden: see
    /// `ElementaryStreamReader`).
    public mutating func verdict(for unit: AccessUnit, atRecoveryPoint: Bool = false) -> Verdict {
        // An end of sequence makes the next picture the first of a new coded video sequence.
        defer {
            if unit.endsSequence {
                started = false
                sawIRAP = false
            }
        }
        guard let type = unit.pictureType else { return .decode }
        if type.isIRAP {
            skippingRASL = type.isIDR || type.isBLA || !sawIRAP
            started = true
            sawIRAP = true
            return .decode
        }
        if atRecoveryPoint && !started {
            // A RASL picture before any IRAP has nothing to refer to (libavcodec skips it too).
            skippingRASL = true
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
        sawIRAP = false
    }
}

/// PicOrderCntVal of each picture in decoding order (§8.3.1), from its slice_pic_order_cnt_lsb
/// and the last picture of TemporalId 0 that is not RASL, RADL or a sub-layer non-reference
/// picture. A picture that starts decoding (an IDR or BLA, an IRAP after an end of sequence, or
/// the first picture of all, however it starts) has PicOrderCntMsb 0, as in a decoder that
/// starts there; what matters is the order of the pictures after it.
struct PictureOrderCounter: Sendable {
    private var previousTid0: (lsb: Int, msb: Int)?

    /// The picture's count; nil without its POC bits or SPS.
    mutating func count(_ unit: AccessUnit) -> Int? {
        defer { if unit.endsSequence { previousTid0 = nil } }
        guard let type = unit.pictureType, let lsb = unit.picOrderCntLsb, let sps = unit.sps else { return nil }
        let maxLsb = 1 << sps.log2MaxPicOrderCntLsb
        var msb = 0
        if let previous = previousTid0, !(type.isIDR || type.isBLA) {
            if lsb < previous.lsb && previous.lsb - lsb >= maxLsb / 2 {
                msb = previous.msb + maxLsb
            } else if lsb > previous.lsb && lsb - previous.lsb > maxLsb / 2 {
                msb = previous.msb - maxLsb
            } else {
                msb = previous.msb
            }
        }
        if unit.temporalId == 0 && !type.isRASL && !type.isRADL && !type.isSubLayerNonReference {
            previousTid0 = (lsb, msb)
        }
        return msb + lsb
    }
}
