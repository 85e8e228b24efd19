import CFFmpeg
import VideoCoding

#if canImport(Glibc)
    import Glibc
#endif

/// One sample of the video track, as the container stored it.
public struct DemuxedSample: Sendable {
    /// The sample's bytes: length-prefixed or Annex B NAL units, as its description says.
    public var payload: [UInt8]
    public var description: SampleDescription
    /// The container marks it a random access point (informational: the codec's reader judges).
    public var isKeyframe: Bool
    /// Its presentation time in `ptsPerSecond` units, rescaled from the track's time base; nil
    /// when the container gave none.
    public var pts: Int64?

    /// The one time base of samples' timestamps: 90 kHz, as MPEG-TS and RTP carry video time.
    public static let ptsPerSecond: Int32 = 90_000

    public init(payload: [UInt8], description: SampleDescription, isKeyframe: Bool, pts: Int64? = nil) {
        self.payload = payload
        self.description = description
        self.isKeyframe = isKeyframe
        self.pts = pts
    }
}

/// What a demuxer read next.
public enum DemuxerOutput: Sendable {
    case sample(DemuxedSample)
    /// The input ended and everything in it was read.
    case end
    case failed(ContainerError)
}

/// A container read with libavformat, one packet at a time, on the caller's thread (reads
/// block until their bytes arrive): a pushed container through `AVIOBridge`, or a URL through
/// libavformat's own protocols (RTSP, RTMP, SRT). Either way inside a `LibavFence`: the
/// demuxer is named, never probed, and only the protocols the input needs may be opened.
///
/// The video track is the first H.264 or H.265 one; its samples come out with their
/// `SampleDescription`. Audio, data and other tracks are counted (`ignoredPackets`) and left.
/// Packets are taken as the demuxer stores them (`AVFMT_FLAG_NOPARSE`): no parser waits for the
/// next picture to cut the current one, so a sample comes out as soon as its last byte is read.
///
/// Not thread-safe: made, read and freed on one thread.
public final class Demuxer {
    /// Packets of tracks other than the video track, by kind (`audio`, `data`, `subtitle`,
    /// `video` for further video tracks, `attachment`).
    public private(set) var ignoredPackets: [String: Int] = [:]
    /// The video track's samples so far.
    public private(set) var samples = 0
    /// The demuxer libavformat used (`mpegts`, `mov,mp4,m4a,3gp,3g2,mj2`, `rtsp`, ...).
    public let formatName: String
    /// What is read, for messages: `MP4`, `the source`.
    private let what: String

    private var format: UnsafeMutablePointer<AVFormatContext>?
    private let packet: UnsafeMutablePointer<AVPacket>
    private var closed = false
    private var bridge: AVIOBridge?
    private let callback: InterruptCallback
    /// What `format` was opened with, to open it again over a fresh bridge.
    private let fence: LibavFence
    private let options: [String: String]
    /// A pushed MP4's boxes, checked before libavformat reads them; it also says when a long
    /// fragmented MP4 is to start a fresh demuxer (see `MP4BoxScreen`).
    private let screen: MP4BoxScreen?
    /// The failure `next` returned; returned again.
    private var failure: ContainerError?
    /// Demuxers started afresh inside this stream.
    private(set) var freshStarts = 0
    /// Added to the video track's timestamps after a fresh start, so that they go on from where
    /// the previous demuxer's left off (fragments without a decode time start again from 0).
    private var timestampShift: Int64 = 0
    /// The video track's last decode time (90 kHz, shifted) and the step to it from the one
    /// before; whether the next sample is the first since a fresh start.
    private var lastDecodeTime: (dts: Int64, step: Int64)?
    private var firstSampleSinceFreshStart = false
    /// Packets are whole access units (containers); false: pieces of one (RTP packets).
    private let packetsAreAccessUnits: Bool
    /// RTP pieces gathered into the access unit they belong to (all the pieces of one access
    /// unit share its RTP timestamp, RFC 6184 and 7798): the unit ends when a piece of another
    /// time arrives, which is when the Annex B reader would end it too, and the decode loop then
    /// gets one sample per picture instead of one per network packet.
    private var gathering: (pts: Int64, sample: DemuxedSample)?
    /// The most bytes gathered into one access unit: eight times the largest NAL unit FrameTap
    /// takes by default, far above any camera's picture. A sender whose pieces all carry one
    /// timestamp would otherwise grow the unit for as long as it sends.
    static let maxGatheredBytes = 64 << 20
    /// MPEG-TS only: a PES libavformat cut into pieces, joined (see `PESPieces`).
    private var pesPieces: PESPieces?
    /// Samples made whole before the one `next` returned: returned first.
    private var ready: [DemuxedSample] = []
    /// The chosen video track's stream index, and its description.
    private var videoStream: Int32?
    private var description: SampleDescription?
    /// The extradata the description was made from (libavformat replaces it on a change).
    private var extradataSeen: (UnsafeMutablePointer<UInt8>?, Int32) = (nil, 0)
    /// Whether streams may still appear after the header (`AVFMTCTX_NOHEADER`, e.g. FLV).
    private let streamsMayAppear: Bool
    /// Packets read while no video track was found, to give up on a stream without one.
    private var packetsWithoutVideo = 0
    /// MPEG-TS only: each stream's first PES context, given back before close.
    private var mergedStreams: MergedStreamOwnership?
    static let packetsBeforeNoVideoVerdict = 512

    /// Opens a pushed container of `container` over `input`. `seekWindow`: the most bytes kept
    /// for the demuxer to seek back in (see `SeekWindow`). Blocks until the header is read.
    public convenience init(
        container: ContainerFormat, input: any DemuxByteInput, seekWindow: Int, interrupt: DemuxInterrupt
    ) throws(ContainerError) {
        try self.init(container: container, input: input, seekWindow: seekWindow, interrupt: interrupt, mp4Limits: .init())
    }

    /// `mp4Limits`: what an MP4 may declare (`MP4BoxScreen.Limits`).
    convenience init(
        container: ContainerFormat, input: any DemuxByteInput, seekWindow: Int, interrupt: DemuxInterrupt,
        mp4Limits: MP4BoxScreen.Limits
    ) throws(ContainerError) {
        let screen = container == .mp4 ? MP4BoxScreen(input: input, limits: mp4Limits) : nil
        let bridge = try AVIOBridge(input: screen ?? input, windowCapacity: seekWindow)
        var options: [String: String] = [:]
        // A new PMT version (a changed PID, a re-muxed stream) keeps the same streams rather
        // than adding new ones the chosen track would not follow.
        if container == .mpegTS { options["merge_pmt_versions"] = "1" }
        try self.init(
            url: nil, fence: .ownInput(container), bridge: bridge, screen: screen, options: options, interrupt: interrupt,
            samplesAreAccessUnits: true, describe: container.displayName)
    }

    /// Opens `url` with libavformat's protocols inside `fence` (`options`: protocol and demuxer
    /// options such as `rtsp_transport`). Blocks until the stream's header is read, the
    /// interrupt's deadline passes, or it is stopped.
    convenience init(
        url: String, fence: LibavFence, options: [String: String], interrupt: DemuxInterrupt
    ) throws(ContainerError) {
        try self.init(
            url: url, fence: fence, bridge: nil, screen: nil, options: options, interrupt: interrupt,
            samplesAreAccessUnits: nil, describe: "the source")
    }

    /// `samplesAreAccessUnits` nil: decided by the demuxer (RTP pieces are not).
    private init(
        url: String?, fence: LibavFence, bridge: AVIOBridge?, screen: MP4BoxScreen?, options: [String: String],
        interrupt: DemuxInterrupt, samplesAreAccessUnits: Bool?, describe what: String
    ) throws(ContainerError) {
        guard let packet = av_packet_alloc() else { throw ContainerError(.invalidContainer, "could not allocate a packet") }
        let callback = InterruptCallback(interrupt: interrupt)
        let context: UnsafeMutablePointer<AVFormatContext>
        do {
            context = try Self.open(url: url, fence: fence, bridge: bridge, screen: screen, options: options, callback: callback, what: what)
        } catch {
            var packet: UnsafeMutablePointer<AVPacket>? = packet
            av_packet_free(&packet)
            throw error
        }
        self.format = context
        self.packet = packet
        self.bridge = bridge
        self.callback = callback
        self.fence = fence
        self.options = options
        self.screen = screen
        self.what = what
        let name = context.pointee.iformat.map { String(cString: $0.pointee.name) } ?? "unknown"
        formatName = name
        packetsAreAccessUnits = samplesAreAccessUnits ?? !(name == "rtsp" || name == "sdp" || name == "rtp")
        // MPEG-TS knows its streams once it has read the PMT, which opening waits for.
        streamsMayAppear = context.pointee.ctx_flags & Int32(AVFMTCTX_NOHEADER) != 0 && name != "mpegts"
        if name == "mpegts" {
            mergedStreams = MergedStreamOwnership()
            mergedStreams?.observe(context)
            pesPieces = PESPieces(maxBytes: Self.maxGatheredBytes)
        }
        if var failure = chooseVideoTrack(final: !streamsMayAppear) {
            if let screen, let box = screen.cutShortBox, !screen.readWholeMovie {
                // Its tracks are what libavformat made of a header cut short: that is the failure.
                failure = ContainerError(.invalidContainer, "the MP4 ended inside its \(box) box, before its header did")
            }
            close()
            throw failure
        }
    }

    /// Opens `url`, or the input behind `bridge`, inside `fence`; blocks until the header is read.
    private static func open(
        url: String?, fence: LibavFence, bridge: AVIOBridge?, screen: MP4BoxScreen?, options: [String: String],
        callback: InterruptCallback, what: String
    ) throws(ContainerError) -> UnsafeMutablePointer<AVFormatContext> {
        guard let context = avformat_alloc_context() else { throw ContainerError(.invalidContainer, "could not allocate a demuxer") }
        context.pointee.interrupt_callback = AVIOInterruptCB(
            callback: { opaque in
                guard let opaque else { return 0 }
                return Unmanaged<InterruptCallback>.fromOpaque(opaque).takeUnretainedValue().check() ? 1 : 0
            },
            opaque: Unmanaged.passUnretained(callback).toOpaque())
        context.pointee.flags |= Int32(AVFMT_FLAG_NOPARSE | AVFMT_FLAG_NOFILLIN)
        if let bridge {
            context.pointee.pb = bridge.context
            context.pointee.flags |= Int32(AVFMT_FLAG_CUSTOM_IO)
        }
        var dictionary: OpaquePointer?
        for (key, value) in options.merging(fence.options, uniquingKeysWith: { _, fenced in fenced }) {
            av_dict_set(&dictionary, key, value, 0)
        }
        var optional: UnsafeMutablePointer<AVFormatContext>? = context
        let status = avformat_open_input(&optional, url, av_find_input_format(fence.demuxer), &dictionary)
        av_dict_free(&dictionary)
        guard status >= 0, let opened = optional else {
            // avformat_open_input freed the context.
            throw error(status, opening: true, what: what, bridge: bridge, screen: screen, interrupt: callback.interrupt)
        }
        return opened
    }

    deinit { close() }

    /// Frees the demuxer now (also done when it is freed).
    public func close() {
        if let opened = format {
            mergedStreams?.restore(opened)
            avformat_close_input(&format)
        }
        if !closed {
            closed = true
            var packet: UnsafeMutablePointer<AVPacket>? = self.packet
            av_packet_free(&packet)
        }
    }

    /// Bytes of a pushed container held for seeking back now (0 for a URL).
    public var heldBytes: Int { bridge?.heldBytes ?? 0 }

    /// The next sample of the video track; blocks until it is read.
    public func next() -> DemuxerOutput {
        if let failure { return .failed(failure) }
        if !ready.isEmpty {
            return handOn(ready.removeFirst())
        }
        // `format` is read again on every turn: a fresh start replaces it.
        while let format {
            let status = av_read_frame(format, packet)
            mergedStreams?.observe(format)
            if status == ft_averror_eagain() { continue }
            guard status >= 0 else {
                if screen?.pausedAt != nil {
                    if let failure = startAfresh() {
                        self.failure = failure
                        return .failed(failure)
                    }
                    continue
                }
                // The access unit being gathered is whole: nothing more of it will come.
                if let gathered = gathering {
                    gathering = nil
                    return handOn(gathered.sample)
                }
                if let joined = pesPieces?.finish() {
                    return handOn(joined)
                }
                // An MP4 whose last box runs to the end: libavformat looks for a box after it,
                // and calls the lack of one invalid data.
                let atEnd = status == ft_averror_eof()
                    || (screen?.endedInBoxToTheEnd == true && status == ft_averror_invaliddata() && bridge?.failedSeek == nil)
                if atEnd && callback.interrupt.reason == nil && !(bridge?.interrupted ?? false) && screen?.refusal == nil {
                    if videoStream == nil, let failure = chooseVideoTrack(final: true) { return .failed(failure) }
                    return .end
                }
                return .failed(
                    Self.error(status, opening: false, what: what, bridge: bridge, screen: screen, interrupt: callback.interrupt))
            }
            defer { av_packet_unref(packet) }
            if packet.pointee.pos >= 0 { bridge?.retain(from: Int(packet.pointee.pos)) }
            let index = packet.pointee.stream_index
            if videoStream == nil, let failure = chooseVideoTrack(final: false) { return .failed(failure) }
            guard let videoStream, index == videoStream, let stream = format.pointee.streams[Int(index)] else {
                count(ignored: index)
                continue
            }
            guard packet.pointee.size > 0, let data = packet.pointee.data else { continue }
            let description = describe(stream)
            let payload = UnsafeBufferPointer(start: data, count: Int(packet.pointee.size))
            let isKeyframe = packet.pointee.flags & AV_PKT_FLAG_KEY != 0
            guard !packetsAreAccessUnits else {
                let sample = DemuxedSample(
                    payload: Array(payload), description: description, isKeyframe: isKeyframe,
                    pts: continuousPTS(in: stream.pointee.time_base))
                guard var pieces = pesPieces else { return handOn(sample) }
                let step = pieces.take(
                    sample, position: packet.pointee.pos, hasTimestamp: packet.pointee.pts != ft_av_nopts_value())
                pesPieces = pieces
                switch step {
                case .tooLarge:
                    return .failed(
                        ContainerError(
                            .invalidContainer,
                            "\(what) carried more than \(Self.maxGatheredBytes >> 20) MiB in one PES packet (one picture)"))
                case .samples(let whole):
                    ready += whole
                }
                guard !ready.isEmpty else { continue }
                return handOn(ready.removeFirst())
            }
            let pts = packet.pointee.pts
            guard pts != ft_av_nopts_value() else {
                // No timestamp to gather by: the pieces go on as pieces, the reader finds the
                // units; after what was gathered before them.
                let piece = DemuxedSample(payload: Array(payload), description: description, isKeyframe: isKeyframe)
                guard let gathered = gathering?.sample else { return handOn(piece) }
                gathering = nil
                ready.append(piece)
                return handOn(gathered)
            }
            var whole = description
            whole.samplesAreAccessUnits = true
            if gathering?.pts == pts, gathering?.sample.description == whole {
                guard (gathering?.sample.payload.count ?? 0) + payload.count <= Self.maxGatheredBytes else {
                    gathering = nil
                    return .failed(
                        ContainerError(
                            .sourceFailed,
                            "the source sent more than \(Self.maxGatheredBytes >> 20) MiB for one picture (its RTP packets all carry one timestamp)"
                        ))
                }
                // In place: a copy taken out of `gathering` would copy the bytes on every piece.
                gathering?.sample.payload.append(contentsOf: payload)
                if isKeyframe { gathering?.sample.isKeyframe = true }
                continue
            }
            let finished = gathering?.sample
            gathering = (
                pts,
                DemuxedSample(
                    payload: Array(payload), description: whole, isKeyframe: isKeyframe,
                    pts: Self.pts90kHz(pts, in: stream.pointee.time_base))
            )
            if let finished {
                return handOn(finished)
            }
        }
        return .end
    }

    // MARK: - Starting afresh (fragmented MP4)

    /// The screen stopped before a fragment: the demuxer that read up to it returned all its
    /// samples, so a fresh one reads on from that fragment, after the file's `ftyp` and `moov`
    /// again, at the offsets the stream gives them (a fragment may name absolute ones).
    private func startAfresh() -> ContainerError? {
        guard let screen, let offset = screen.pausedAt, let initSegment = screen.initSegment, let old = bridge else {
            return ContainerError(.invalidContainer, "could not read on into the next fragment")
        }
        avformat_close_input(&format)
        screen.resume()
        do {
            let fresh = try AVIOBridge(
                input: PrefixedInput(prefix: initSegment, rest: screen), windowCapacity: old.windowCapacity,
                startingAt: offset - initSegment.count)
            bridge = fresh
            format = try Self.open(
                url: nil, fence: fence, bridge: fresh, screen: screen, options: options, callback: callback, what: what)
        } catch {
            return error
        }
        freshStarts += 1
        firstSampleSinceFreshStart = true
        extradataSeen = (nil, 0)
        let previous = videoStream
        videoStream = nil
        if let failure = chooseVideoTrack(final: true) { return failure }
        guard videoStream == previous else {
            return ContainerError(.invalidContainer, "the MP4's video track moved when its demuxer started afresh")
        }
        return nil
    }

    /// The current packet's presentation time in 90 kHz units, going on across fresh starts.
    private func continuousPTS(in timeBase: AVRational) -> Int64? {
        guard screen != nil, let decodeTime = Self.pts90kHz(packet.pointee.dts, in: timeBase) else {
            return Self.pts90kHz(packet.pointee.pts, in: timeBase)
        }
        // Wrapping arithmetic: a container's times may be anything, and are only passed on.
        if firstSampleSinceFreshStart, let last = lastDecodeTime, decodeTime &+ timestampShift < last.dts {
            timestampShift = last.dts &+ last.step &- decodeTime
        }
        firstSampleSinceFreshStart = false
        let shifted = decodeTime &+ timestampShift
        // libavformat leaves packet durations unset here: the step is the last difference.
        let step = lastDecodeTime.map { shifted > $0.dts ? shifted &- $0.dts : $0.step } ?? 0
        lastDecodeTime = (shifted, step)
        return Self.pts90kHz(packet.pointee.pts, in: timeBase).map { $0 &+ timestampShift }
    }

    /// Every sample goes out through here, so `samples` counts each once.
    private func handOn(_ sample: DemuxedSample) -> DemuxerOutput {
        samples += 1
        return .sample(sample)
    }

    /// `pts` of a track with `timeBase` in `DemuxedSample.ptsPerSecond` units; nil for none.
    static func pts90kHz(_ pts: Int64, in timeBase: AVRational) -> Int64? {
        guard pts != ft_av_nopts_value(), timeBase.num > 0, timeBase.den > 0 else { return nil }
        let rescaled = av_rescale_q(pts, timeBase, AVRational(num: 1, den: DemuxedSample.ptsPerSecond))
        // libavutil's answer when the result does not fit.
        return rescaled == Int64.min ? nil : rescaled
    }

    // MARK: - The video track

    /// Picks the first H.264 or H.265 video track. Returns why there is none when that is
    /// settled: a video track of another codec (`unsupported_codec`), or none at all
    /// (`no_video_track`) once `final`, or after many packets of other kinds.
    private func chooseVideoTrack(final: Bool) -> ContainerError? {
        guard let format else { return nil }
        var unsupported: [String] = []
        for index in 0..<Int(format.pointee.nb_streams) {
            guard let stream = format.pointee.streams[index], let parameters = stream.pointee.codecpar else { continue }
            guard parameters.pointee.codec_type == AVMEDIA_TYPE_VIDEO,
                stream.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0
            else { continue }
            switch parameters.pointee.codec_id {
            case AV_CODEC_ID_H264, AV_CODEC_ID_HEVC:
                videoStream = Int32(index)
                return nil
            case AV_CODEC_ID_NONE:
                // libavformat knows no codec for it (or its description was cut short): named by
                // the container's tag when it gave one.
                let tag = parameters.pointee.codec_tag
                let letters = (0..<4).map { UInt8(truncatingIfNeeded: tag >> (8 * $0)) }
                if tag != 0, letters.allSatisfy({ (0x20...0x7E).contains($0) }) {
                    unsupported.append("'\(String(decoding: letters, as: UTF8.self))'")
                } else if tag == 12, formatName == "flv" {
                    // The common extension before Enhanced RTMP; libavformat 5.1 reads neither.
                    return ContainerError(
                        .unsupportedCodec,
                        "the video track is H.265 under FLV's codec id 12, an extension this libavformat does not read: "
                            + "send H.265 as MPEG-TS, fragmented MP4, Matroska or RTSP")
                } else {
                    unsupported.append(tag == 0 ? "of a codec libavformat does not know" : "of the container's codec \(tag)")
                }
            default:
                unsupported.append(String(cString: avcodec_get_name(parameters.pointee.codec_id)))
            }
        }
        if !unsupported.isEmpty {
            return ContainerError(
                .unsupportedCodec,
                "the video track is \(unsupported.joined(separator: ", ")); FrameTap decodes H.264 and H.265")
        }
        packetsWithoutVideo += final ? 0 : 1
        if final || packetsWithoutVideo > Self.packetsBeforeNoVideoVerdict {
            let kinds = (0..<Int(format.pointee.nb_streams)).compactMap { index -> String? in
                (format.pointee.streams[index]?.pointee.codecpar?.pointee.codec_type).map(Self.name(of:))
            }
            if kinds.isEmpty, formatName == "mpegts" {
                // libavformat makes MPEG-TS tracks from the programme tables: bytes of another
                // kind (noise, a stream that is not MPEG-TS) give none.
                return ContainerError(
                    .invalidContainer, "no MPEG-TS programme table came: the bytes are not MPEG-TS, or name no programme")
            }
            return ContainerError(
                .noVideoTrack,
                kinds.isEmpty ? "the container holds no track" : "the container holds no video track, only \(kinds.joined(separator: ", "))")
        }
        return nil
    }

    /// The description of the chosen track now: its extradata may change mid-stream (new side
    /// data, or a new FLV sequence header).
    private func describe(_ stream: UnsafeMutablePointer<AVStream>) -> SampleDescription {
        var size = 0
        if let side = av_packet_get_side_data(packet, AV_PKT_DATA_NEW_EXTRADATA, &size), size > 0 {
            description?.configuration = Array(UnsafeBufferPointer(start: side, count: size))
        }
        let parameters = stream.pointee.codecpar!
        let extradata = (parameters.pointee.extradata, parameters.pointee.extradata_size)
        if description == nil || extradata != extradataSeen {
            extradataSeen = extradata
            let codec: VideoCodec = parameters.pointee.codec_id == AV_CODEC_ID_HEVC ? .h265 : .h264
            let bytes = extradata.0.map { Array(UnsafeBufferPointer(start: $0, count: Int(max(0, extradata.1)))) } ?? []
            description = SampleDescription(codec: codec, configuration: bytes, samplesAreAccessUnits: packetsAreAccessUnits)
        }
        return description!
    }

    private func count(ignored index: Int32) {
        guard let format, index >= 0, index < Int32(format.pointee.nb_streams),
            let type = format.pointee.streams[Int(index)]?.pointee.codecpar?.pointee.codec_type
        else { return }
        ignoredPackets[Self.name(of: type), default: 0] += 1
    }

    /// A track's kind in libavutil's words ("audio", "data"); libavutil has none for a kind it
    /// does not know (a stream type a container invented), which hostile input can make.
    private static func name(of type: AVMediaType) -> String {
        av_get_media_type_string(type).map { String(cString: $0) } ?? "unknown"
    }

    // MARK: - Errors

    private static func error(
        _ status: Int32, opening: Bool, what: String, bridge: AVIOBridge?, screen: MP4BoxScreen?, interrupt: DemuxInterrupt
    ) -> ContainerError {
        if let refusal = screen?.refusal { return refusal }
        switch interrupt.reason {
        case .refused(let error): return error
        case .timedOut:
            return ContainerError(.sourceTimeout, opening ? "\(what) did not answer in time" : "\(what) sent no whole packet of its stream in time")
        case .stopped, .letGo: return ContainerError(.sourceEnded, "stopped")
        case nil: break
        }
        if let bridge, let offset = bridge.failedSeek {
            return ContainerError(
                .containerNeedsSeeking,
                "reading \(what) needed its byte \(offset) again, which is no longer kept (the seek window holds "
                    + "\(bridge.windowCapacity) bytes): push a container that reads front to back (for MP4: its moov box "
                    + "first, ffmpeg -movflags +faststart, or fragmented), or one shorter than the seek window")
        }
        let why = libavErrorString(status)
        guard bridge == nil else {
            if opening && status == ft_averror_eof() {
                return ContainerError(.invalidContainer, "\(what) ended before its header did")
            }
            return ContainerError(.invalidContainer, "cannot read \(what): \(why)")
        }
        switch status {
        case ft_averror(ECONNREFUSED), ft_averror(EHOSTUNREACH), ft_averror(ENETUNREACH), ft_averror(EADDRNOTAVAIL):
            return ContainerError(.sourceUnreachable, "\(what): \(why)")
        case ft_averror(ETIMEDOUT):
            return ContainerError(.sourceTimeout, "\(what): \(why)")
        case ft_averror_http_unauthorized(), ft_averror_http_forbidden():
            return ContainerError(.sourceUnauthorized, "\(what): \(why)")
        case ft_averror_http_not_found():
            return ContainerError(.sourceNotFound, "\(what): \(why)")
        case ft_averror_eof():
            return ContainerError(.sourceEnded, opening ? "\(what) closed before its stream began" : "\(what) ended its stream")
        default:
            return ContainerError(.sourceFailed, "\(what): \(why)")
        }
    }
}

/// libavutil's text for an error code.
func libavErrorString(_ code: Int32) -> String {
    var buffer = [CChar](repeating: 0, count: Int(AV_ERROR_MAX_STRING_SIZE))
    av_strerror(code, &buffer, buffer.count)
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// What libavformat's interrupt callback reaches (between reads, and every 100 ms or so while
/// a socket waits).
final class InterruptCallback {
    let interrupt: DemuxInterrupt

    init(interrupt: DemuxInterrupt) {
        self.interrupt = interrupt
    }

    func check() -> Bool {
        interrupt.shouldInterrupt()
    }
}
