import H264
import H265
import VideoCoding

/// The bitstream layer's front: which codec a stream is, and that codec's reader. Everything
/// above the bitstream layer goes through here and the shared vocabulary (`VideoCoding`); none
/// of it imports a codec's own target.
public enum Codecs {
    /// The reader of an elementary stream of `codec`. `emulateFFmpegProbe`: hold pictures until
    /// the first parameter sets, as the ffmpeg CLI's stream probe does (see `ParameterSetWait`).
    /// `live`: a session's stream, which never passes on a picture before the stream's first
    /// random-access point (the CLI emulating ffmpeg passes H.265's on, as ffmpeg decodes them).
    public static func reader(for codec: VideoCodec, emulateFFmpegProbe: Bool = false, live: Bool = false) -> any AccessUnitReader {
        switch codec {
        case .h264: H264.ElementaryStreamReader(emulateFFmpegProbe: emulateFFmpegProbe)
        case .h265: H265.ElementaryStreamReader(emulateFFmpegProbe: emulateFFmpegProbe, live: live)
        }
    }
}

/// Tells H.264 from H.265 by their parameter sets, the first units a decodable stream has.
///
/// The two codecs' NAL headers overlap, but not on these: an H.265 VPS, SPS or PPS header
/// (`40 01`, `42 01`, `44 01`: types 32-34, base layer, temporal id 0) reads in H.264 as a NAL
/// type no encoder writes (0) or a data partition (2, 4), which only the Extended profile has and
/// never directly after a start of stream; an H.264 SPS (`67`/`47`/`27` then a profile_idc
/// H.264 defines) reads in H.265 as an unspecified type (48-63) or a unit of a layer above the
/// base. So one parameter set decides, and a parameter set of the other codec in a stream of
/// known codec contradicts it.
public enum CodecDetector {
    /// The codec whose parameter set `unit` is, or nil when it is not one.
    public static func codec(ofParameterSet unit: AnnexBUnit) -> VideoCodec? {
        let bytes = unit.bytes
        guard bytes.count >= 2 else { return nil }
        if isH265ParameterSet(bytes[0], bytes[1]) { return .h265 }
        if isH264ParameterSet(bytes) { return .h264 }
        return nil
    }

    /// Profile_idc values H.264 defines (A.2, G.10, H.10): an SPS names one of them.
    static let h264Profiles: Set<UInt8> = [44, 66, 77, 83, 86, 88, 100, 110, 118, 122, 128, 134, 135, 138, 139, 244]

    static func isH265ParameterSet(_ first: UInt8, _ second: UInt8) -> Bool {
        (first == 0x40 || first == 0x42 || first == 0x44) && second == 0x01
    }

    /// An SPS (type 7) with nal_ref_idc set and a known profile, or a PPS (type 8) with
    /// nal_ref_idc set whose H.265 reading is not a base-layer unit an encoder writes.
    static func isH264ParameterSet(_ bytes: SlabBytes) -> Bool {
        let header = bytes[0]
        guard header & 0x80 == 0, header & 0x60 != 0 else { return false }
        switch header & 0x1F {
        case 7: return h264Profiles.contains(bytes[1])
        case 8:
            // As H.265: type (header >> 1) & 0x3F with the layer id's top bit in bit 0.
            let hevcType = (header >> 1) & 0x3F
            return hevcType >= 48 || header & 1 == 1
        default: return false
        }
    }
}
