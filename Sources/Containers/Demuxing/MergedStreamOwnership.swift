import CFFmpeg

/// Keeps libavformat 5.1's MPEG-TS demuxer from freeing one PES context twice.
///
/// With `merge_pmt_versions` (which `Demuxer` sets, so that a new PMT version keeps its streams),
/// a PID that joins an existing stream gets a PES context of its own that points at that stream
/// and is marked merged. The demuxer then makes it the stream's `priv_data`, replacing the
/// stream's first PES context. At close, libavformat frees every merged PES context with its
/// filter, and every stream's `priv_data` after that: the merged one a second time (an abort in
/// glibc, found by `make fuzz`'s container target), while the stream's first one is never freed.
///
/// So the first `priv_data` each stream was seen with is kept, and given back to the stream just
/// before close: the merged context is then freed once, with its filter, and the first once, with
/// its stream. Streams are looked at right after opening and after every read. A merge while the
/// header is read (a second PMT version within the probe) would come before the first look; the
/// fuzz target, which found the merge after opening, has not found that one.
struct MergedStreamOwnership {
    /// The first `priv_data` of each stream, by index.
    private var first: [UnsafeMutableRawPointer?] = []

    /// Notes the streams that appeared since the last look.
    mutating func observe(_ format: UnsafeMutablePointer<AVFormatContext>) {
        let count = Int(format.pointee.nb_streams)
        guard count > first.count, let streams = format.pointee.streams else { return }
        for index in first.count..<count {
            first.append(streams[index]?.pointee.priv_data)
        }
    }

    /// Gives each stream back the `priv_data` it was first seen with; call just before
    /// `avformat_close_input`.
    func restore(_ format: UnsafeMutablePointer<AVFormatContext>) {
        guard let streams = format.pointee.streams else { return }
        for index in 0..<min(first.count, Int(format.pointee.nb_streams)) {
            guard let stream = streams[index], let original = first[index], stream.pointee.priv_data != original else { continue }
            stream.pointee.priv_data = original
        }
    }
}
