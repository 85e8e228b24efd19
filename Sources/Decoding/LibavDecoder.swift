import CFFmpeg
import VideoCoding

/// Decodes H.264 or H.265 with libavcodec, like FFmpeg's doc/examples decode loops: parse →
/// send packet → receive frames, plus drain at end of stream.
///
/// Two ways in, one per stream:
/// - `decode(annexB:)` takes raw Annex B bytes in any chunking and cuts them into access units
///   with libavcodec's parser, as the ffmpeg CLI's raw `h264`/`hevc` demuxers do, so the frames
///   equal `ffmpeg -flags unaligned -f h264 -i F -autoscale 0 -fps_mode passthrough -f rawvideo -`.
/// - `decode(accessUnit:)` takes complete access units (StreamDecoder assembles them), one
///   packet each, so a picture does not wait for the next one to start.
///
/// H.264 pictures decoded before the stream recovered at a start point that is not an IDR come
/// out too, marked `DecodedFrame.precedesRecovery` (see `openContext`): a caller that shows
/// pictures leaves those out, as `AccessUnitDecoder` does after numbering them.
///
/// Not thread-safe: the C contexts are owned by one worker (a session or the CLI loop) and
/// must only be used from it. Frames it returns are immutable and `Sendable`.
public final class LibavDecoder: PictureDecoder {
    public let codec: VideoCodec
    public let options: DecoderOptions
    /// The back end this decoder decodes on. Fixed: when the hardware turns the stream down,
    /// the decoder says so (`DecodeOutput.hardwareRefusal`) and `BackendSupervisor` replaces it.
    public let backend: DecoderBackend
    /// Frames returned since creation (output order).
    public private(set) var framesDecoded: UInt64 = 0
    /// Packets or frames libavcodec rejected since creation.
    public private(set) var decodeErrors: Int = 0
    public private(set) var lastError: DecodeError?

    private var codecContext: UnsafeMutablePointer<AVCodecContext>
    private var parser: UnsafeMutablePointer<AVCodecParserContext>
    private let packet: UnsafeMutablePointer<AVPacket>
    private let frame: UnsafeMutablePointer<AVFrame>
    /// The shared device context a hardware decoder decodes on (kept alive by this reference),
    /// and the `get_format` state, shared with the callback through `AVCodecContext.opaque`.
    private let hardware: (device: HardwareDeviceContext, negotiation: FormatNegotiation)?
    private var deviceFrames: DeviceFrameBudget
    /// The parser reads up to `AV_INPUT_BUFFER_PADDING_SIZE` bytes past its input, so input is
    /// copied here with zeroed padding behind it.
    private var paddedInput: UnsafeMutableRawBufferPointer
    /// Where whole access units are copied for libavcodec, reused once it let go of them.
    private var packetBuffers = PacketBuffers()
    /// Bytes from the end of the last `decode` that the parser must not see yet (see `stage`).
    private var heldBack: [UInt8] = []
    /// While set, access units go to a throwaway decoder first (see `DecoderOptions.emulateFFmpegProbe`).
    private var reorderProbe: ReorderProbe?
    /// Set by `reuseForAnotherStream`: the reorder probe keeps this context where it can.
    private var servesAnotherStream = false
    /// Whether `DecodeOutput.decodedInSoftware` was said already.
    private var reportedDecodedInSoftware = false

    /// Opens the decoder on the back end `options.backend` selects (`BackendSelection`): with
    /// `.auto` the first of CUDA, VA-API and software with a device that opens; `.cuda`/`.vaapi`
    /// throw `.decoderUnavailable` when no device of that kind opens. For a stream, use
    /// `StreamDecoder`, whose `BackendSupervisor` also falls back mid-stream.
    public convenience init(codec: VideoCodec = .h264, options: DecoderOptions = DecoderOptions()) throws(DecodeError) {
        let options = try options.validated()
        try self.init(codec: codec, options: options, plan: BackendSelection.plan(options: options))
    }

    /// Opens the decoder `plan` describes; throws when its codec context does not open.
    public init(codec: VideoCodec, options: DecoderOptions, plan: DecoderPlan) throws(DecodeError) {
        self.codec = codec
        self.options = try options.validated()
        guard avcodec_find_decoder(codec.libavID) != nil else {
            throw DecodeError(.decoderUnavailable, "libavcodec has no \(codec.displayName) decoder")
        }
        let hardware: (device: HardwareDeviceContext, negotiation: FormatNegotiation)?
        if plan.backend == .software {
            hardware = nil
        } else if let kind = plan.backend.hardwareKind, let lease = plan.lease, lease.device.kind == kind {
            hardware = (lease.decoderContext(streams: options.cudaStreams), FormatNegotiation(hardware: kind, device: lease.device))
        } else {
            throw DecodeError(.invalidOptions, "a \(plan.backend.rawValue) decoder needs a lease on a \(plan.backend.rawValue) device")
        }
        if let hardware, hardware.device.buffer == nil {
            throw DecodeError(.decoderUnavailable, "\(plan.reason): no device context libavcodec can use")
        }

        // From here on every resource is released by `release` on failure, or by deinit.
        let parser = av_parser_init(Int32(codec.libavID.rawValue))
        let packet = av_packet_alloc()
        let frame = av_frame_alloc()
        func release() {
            av_parser_close(parser)
            var packet = packet
            av_packet_free(&packet)
            var frame = frame
            av_frame_free(&frame)
        }
        guard let parser, let packet, let frame else {
            release()
            throw DecodeError(.allocationFailed, "could not allocate the \(codec.displayName) parser, packet or frame")
        }
        let context: UnsafeMutablePointer<AVCodecContext>
        do throws(DecodeError) {
            context = try Self.openContext(codec: codec, options: options, hardware: hardware)
        } catch {
            release()
            throw error
        }

        self.backend = plan.backend
        self.codecContext = context
        self.parser = parser
        self.packet = packet
        self.frame = frame
        self.hardware = hardware
        self.deviceFrames = DeviceFrameBudget(limit: options.deviceFramesHeld)
        self.paddedInput = .allocate(byteCount: 64 * 1024 + Int(AV_INPUT_BUFFER_PADDING_SIZE), alignment: 64)
        if options.emulateFFmpegProbe && codec.reorderDelayNeedsProbing { startReorderProbe() }
    }

    /// Opens a decoding context. `reorderDelay` presets `has_b_frames`, as the ffmpeg CLI does
    /// from its stream probe; `hardware` nil means software.
    private static func openContext(
        codec videoCodec: VideoCodec, options: DecoderOptions, hardware: (device: HardwareDeviceContext, negotiation: FormatNegotiation)?,
        reorderDelay: Int32 = 0, threads: Int? = nil, outputsUnrecovered: Bool = true
    ) throws(DecodeError) -> UnsafeMutablePointer<AVCodecContext> {
        guard let codec = avcodec_find_decoder(videoCodec.libavID), let context = avcodec_alloc_context3(codec) else {
            throw DecodeError(.allocationFailed, "could not allocate an \(videoCodec.displayName) decoder context")
        }
        // Exact crops at odd offsets (e.g. 300x168 from 304x176) need unaligned plane pointers.
        context.pointee.flags |= Int32(AV_CODEC_FLAG_UNALIGNED)
        // H.264's decoder leaves out the pictures it decodes before the stream recovers at a
        // start point that is not an IDR (a recovery point, an I picture). Asked, it outputs them
        // flagged instead (`DecodedFrame.precedesRecovery`), so that they still take their places
        // in the numbering: pictures after them keep the numbers a decoder that started earlier
        // gives them. A picture it would output anyway comes out unflagged, as before (and `drain`
        // turns the flag off for the end of a stream: see there). The reorder probe counts
        // pictures as the CLI's probe does, so it does not ask.
        if videoCodec == .h264 && outputsUnrecovered { context.pointee.flags |= Int32(AV_CODEC_FLAG_OUTPUT_CORRUPT) }
        context.pointee.thread_count = Int32(threads ?? options.threads)
        switch options.threadType {
        case .frame: context.pointee.thread_type = FF_THREAD_FRAME
        case .slice: context.pointee.thread_type = FF_THREAD_SLICE
        case .auto: context.pointee.thread_type = FF_THREAD_FRAME | FF_THREAD_SLICE
        }
        context.pointee.has_b_frames = reorderDelay
        if let hardware, let device = hardware.device.buffer {
            // FFmpeg's doc/examples/hw_decode.c: the codec context takes its own reference to
            // the (shared) device context and picks the hardware format in get_format.
            context.pointee.hw_device_ctx = av_buffer_ref(device)
            context.pointee.opaque = Unmanaged.passUnretained(hardware.negotiation).toOpaque()
            context.pointee.get_format = chooseFormat
            // Surfaces beyond the decoder's own (DPB) needs, for the pictures callers keep on
            // the device (`DeviceFrameBudget` never lets them hold more than this minus one).
            context.pointee.extra_hw_frames = Int32(options.deviceFramesHeld + 1)
            // The GPU decodes; frame threads would only add surfaces and delay.
            context.pointee.thread_count = 1
            context.pointee.thread_type = FF_THREAD_SLICE
        }
        let status = avcodec_open2(context, codec, nil)
        guard status >= 0 else {
            var failed: UnsafeMutablePointer<AVCodecContext>? = context
            avcodec_free_context(&failed)
            throw DecodeError(averror: status, "libavcodec could not open the \(videoCodec.displayName) decoder")
        }
        return context
    }

    deinit {
        var context: UnsafeMutablePointer<AVCodecContext>? = codecContext
        avcodec_free_context(&context)
        var probeContext = reorderProbe?.context
        avcodec_free_context(&probeContext)
        av_parser_close(parser)
        var packet: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&packet)
        var frame: UnsafeMutablePointer<AVFrame>? = frame
        av_frame_free(&frame)
        paddedInput.deallocate()
        packetBuffers.release()
    }

    /// Feeds the next bytes of the stream, in any chunking. Returns the frames that became
    /// ready; a picture whose end has not arrived yet comes out with a later call or `drain`.
    /// `pts` is passed through to the frames of the access unit that starts in these bytes.
    public func decode(annexB bytes: UnsafeRawBufferPointer, pts: Int64? = nil) -> DecodeOutput {
        var output = DecodeOutput()
        let (input, count) = stage(bytes, holdingBackUnsafeTail: true)
        var offset = 0
        while offset < count {
            offset += parse(input + offset, count: count - offset, pts: pts, into: &output)
        }
        return output
    }

    public func decode(annexB bytes: [UInt8], pts: Int64? = nil) -> DecodeOutput {
        bytes.withUnsafeBytes { decode(annexB: $0, pts: pts) }
    }

    /// Sends one complete access unit (Annex B bytes of one picture, e.g. `AccessUnit.annexB()`)
    /// as one packet, bypassing the parser: a picture comes out as soon as it is decodable,
    /// instead of when the next one starts. The caller is responsible for the picture-size
    /// check (StreamDecoder does it from the SPS). Use this or `decode(annexB:)` for a
    /// stream, not both.
    ///
    /// `index` goes through libavcodec with the picture (`AVCodecContext.reordered_opaque`, set
    /// before the packet is sent: FFmpeg 5.1 has no `AV_CODEC_FLAG_COPY_OPAQUE`) and comes out
    /// as `DecodedFrame.accessUnitIndex`, so a caller knows which access unit each picture,
    /// reordered, came from.
    public func decode(accessUnit bytes: UnsafeRawBufferPointer, pts: Int64? = nil, index: Int64?) -> DecodeOutput {
        var output = DecodeOutput()
        guard bytes.count > 0, bytes.count <= Int(Int32.max) else { return output }
        if reorderProbe == nil, let buffer = packetBuffers.buffer(holding: bytes) {
            // The packet owns a reference to memory libavcodec can keep: it takes it without a copy.
            let unit = ParsedUnit(
                data: buffer.pointee.data, size: Int32(bytes.count), pts: pts ?? ft_av_nopts_value(),
                dts: ft_av_nopts_value(), isKey: false, opaque: index ?? ft_av_nopts_value(), buffer: buffer)
            send(unit, into: &output)
            return output
        }
        let (data, _) = stage(bytes, holdingBackUnsafeTail: false)
        let unit = ParsedUnit(
            data: data, size: Int32(bytes.count), pts: pts ?? ft_av_nopts_value(), dts: ft_av_nopts_value(),
            isKey: false, opaque: index ?? ft_av_nopts_value())
        if reorderProbe != nil {
            probe(unit, into: &output)
        } else {
            send(unit, into: &output)
        }
        return output
    }

    public func decode(accessUnit bytes: [UInt8], pts: Int64? = nil, index: Int64? = nil) -> DecodeOutput {
        bytes.withUnsafeBytes { decode(accessUnit: $0, pts: pts, index: index) }
    }

    /// End of stream: returns every frame still inside the parser or the decoder (the last
    /// access unit, reordering and frame-threading delay), then resets both so the next
    /// `decode` starts a fresh stream. Parameter sets are not kept: with the reorder-delay probe
    /// the next stream is decoded by a context opened for it, so they must come again.
    public func drain() -> DecodeOutput {
        var output = DecodeOutput()
        let (input, count) = stage(UnsafeRawBufferPointer(start: nil, count: 0), holdingBackUnsafeTail: false)
        var offset = 0
        while offset < count {
            offset += parse(input + offset, count: count - offset, pts: nil, into: &output)
        }
        // An empty parse tells the parser no more bytes follow, so it releases the last unit.
        _ = parse(input, count: 0, pts: nil, into: &output)
        if reorderProbe != nil { finishReorderProbe(into: &output) }

        // H.264's decoder flags the pictures it has not recovered only as they leave its
        // reordering; those it releases at the end of the stream would come out unflagged.
        // Without the flag it keeps them back, as the CLI's decoder does (nothing after them
        // needs a number). Frame threads still release flagged ones decoded before.
        let outputsUnrecovered = flagsUnrecovered
        if outputsUnrecovered { codecContext.pointee.flags &= ~Int32(AV_CODEC_FLAG_OUTPUT_CORRUPT) }
        let status = avcodec_send_packet(codecContext, nil)
        if status < 0 {
            record(DecodeError(averror: status, "libavcodec failed at the end of the stream"), in: &output)
        }
        receiveFrames(into: &output)
        avcodec_flush_buffers(codecContext)
        if outputsUnrecovered { codecContext.pointee.flags |= Int32(AV_CODEC_FLAG_OUTPUT_CORRUPT) }
        if let freshParser = av_parser_init(Int32(codec.libavID.rawValue)) {
            av_parser_close(parser)
            parser = freshParser
        }
        if options.emulateFFmpegProbe && codec.reorderDelayNeedsProbing { startReorderProbe() }
        return output
    }

    // MARK: - The decode loop (parse → size check → send → receive)

    /// Runs the parser once over `count` bytes at `data`; returns how many it consumed.
    private func parse(
        _ data: UnsafeMutablePointer<UInt8>, count: Int, pts: Int64?, into output: inout DecodeOutput
    ) -> Int {
        var unit: UnsafeMutablePointer<UInt8>?
        var unitSize: Int32 = 0
        let consumed = av_parser_parse2(
            parser, codecContext, &unit, &unitSize, data, Int32(count),
            pts ?? ft_av_nopts_value(), ft_av_nopts_value(), 0)
        if unitSize > 0, let unit {
            sendAccessUnit(unit, size: unitSize, into: &output)
        }
        // The H.264 parser always consumes something when given bytes; guard against a stall anyway.
        return count > 0 ? max(Int(consumed), 1) : 0
    }

    private func sendAccessUnit(_ data: UnsafeMutablePointer<UInt8>, size: Int32, into output: inout DecodeOutput) {
        // Second line of defence behind StreamDecoder's SPS check: the parser has just read
        // this unit's SPS, so a picture above the limit never reaches the allocating decoder.
        if parser.pointee.coded_width > 0 && parser.pointee.coded_height > 0 {
            do {
                try options.sizeLimit.check(
                    width: Int(parser.pointee.coded_width), height: Int(parser.pointee.coded_height))
            } catch {
                record(error, in: &output)
                return
            }
        }
        let unit = ParsedUnit(
            data: data, size: size, pts: parser.pointee.pts, dts: parser.pointee.dts,
            isKey: parser.pointee.key_frame == 1, opaque: ft_av_nopts_value())
        if reorderProbe != nil {
            probe(unit, into: &output)
        } else {
            send(unit, into: &output)
        }
    }

    private func send(_ unit: ParsedUnit, into output: inout DecodeOutput) {
        // Without a buffer of its own, avcodec_send_packet copies the bytes into a new one.
        packet.pointee.buf = unit.buffer
        packet.pointee.data = unit.data
        packet.pointee.size = unit.size
        packet.pointee.pts = unit.pts
        packet.pointee.dts = unit.dts
        packet.pointee.flags = unit.isKey ? AV_PKT_FLAG_KEY : 0
        codecContext.pointee.reordered_opaque = unit.opaque
        var status = avcodec_send_packet(codecContext, packet)
        if status == ft_averror_eagain() {
            // The decoder holds output it wants read first; read it, then the packet fits.
            receiveFrames(into: &output)
            status = avcodec_send_packet(codecContext, packet)
        }
        av_packet_unref(packet)
        if let refusal = hardware?.negotiation.takeRefusal() {
            // Not this decoder's to work around: the supervisor decides (software, or an error).
            output.hardwareRefusal = refusal
        } else if status < 0 {
            // libavcodec skips the broken unit and resynchronises by itself (at the latest
            // at the next IDR); the frames it can still produce are read below as usual.
            record(DecodeError(averror: status, "libavcodec could not decode an access unit"), in: &output)
        }
        receiveFrames(into: &output)
    }

    public func reuseForAnotherStream() {
        servesAnotherStream = true
        // The next stream's supervisor has heard nothing: a picture decoded in software is news to it.
        reportedDecodedInSoftware = false
    }

    // MARK: - Reorder-delay probe (what the ffmpeg CLI learns before it starts decoding)

    /// True while the first access units of a stream go to the reorder-delay probe.
    public var isProbingReorderDelay: Bool { reorderProbe != nil }

    /// Ends the probe now (the caller knows the stream's reorder delay needs no probing) and
    /// returns what the buffered units decode to.
    public func endReorderProbe() -> DecodeOutput {
        var output = DecodeOutput()
        finishReorderProbe(into: &output)
        return output
    }

    /// Starts buffering the stream's first access units for the probe.
    private func startReorderProbe() {
        guard reorderProbe == nil else { return }
        // Like avformat_find_stream_info's decoder: software, one thread.
        guard let context = try? Self.openContext(
            codec: codec, options: options, hardware: nil, threads: 1, outputsUnrecovered: false) else {
            return  // without a probe the decoder still works, it just learns reordering later
        }
        reorderProbe = ReorderProbe(context: context)
    }

    /// Decodes `unit` with the probe context only, keeping a copy for the real decoder.
    private func probe(_ unit: ParsedUnit, into output: inout DecodeOutput) {
        guard var probe = reorderProbe else { return }
        probe.units.append((Array(UnsafeBufferPointer(start: unit.data, count: Int(unit.size))), unit))
        probe.bytes += Int(unit.size)
        packet.pointee.data = unit.data
        packet.pointee.size = unit.size
        if avcodec_send_packet(probe.context, packet) >= 0 {
            while avcodec_receive_frame(probe.context, frame) >= 0 {
                probe.framesDecoded += 1
                av_frame_unref(frame)
            }
        }
        av_packet_unref(packet)
        reorderProbe = probe
        // avformat_find_stream_info stops guessing the H.264 decode delay after 7 pictures
        // (18 or 20 when it is already 3 or more), or at its 5 MB probe size.
        let delay = probe.context.pointee.has_b_frames
        let enough = delay < 3 ? 7 : delay < 4 ? 18 : 20
        if probe.framesDecoded >= enough || probe.bytes >= 5_000_000 {
            finishReorderProbe(into: &output)
        }
    }

    /// Reopens the real decoder with the reorder delay the probe learned and feeds it the
    /// buffered units.
    private func finishReorderProbe(into output: inout DecodeOutput) {
        guard let probe = reorderProbe else { return }
        reorderProbe = nil
        let learnedDelay = probe.context.pointee.has_b_frames
        var probeContext: UnsafeMutablePointer<AVCodecContext>? = probe.context
        avcodec_free_context(&probeContext)
        if servesAnotherStream && codecContext.pointee.has_b_frames >= learnedDelay {
            // A drained context that already reorders at least as much: kept, with the hardware
            // decoder libavcodec made in it (a fresh one would open that again).
            replay(probe, into: &output)
            return
        }
        do {
            let fresh = try Self.openContext(codec: codec, options: options, hardware: hardware, reorderDelay: learnedDelay)
            var old: UnsafeMutablePointer<AVCodecContext>? = codecContext
            avcodec_free_context(&old)
            codecContext = fresh
        } catch {
            // The existing context is still usable; it learns reordering by itself.
            record(error, in: &output)
        }
        replay(probe, into: &output)
    }

    /// Sends the units the probe buffered to the real decoder.
    private func replay(_ probe: ReorderProbe, into output: inout DecodeOutput) {
        for (var bytes, unit) in probe.units {
            bytes.withUnsafeMutableBufferPointer { buffer in
                var replayed = unit
                replayed.data = buffer.baseAddress!
                send(replayed, into: &output)
            }
        }
    }

    /// The decoding context is opened with `AV_CODEC_FLAG_OUTPUT_CORRUPT` (see `openContext`), so
    /// its `AV_FRAME_FLAG_CORRUPT` marks a picture before recovery, also on the pictures frame
    /// threads release while `drain` has the flag off.
    private var flagsUnrecovered: Bool { codec == .h264 }

    /// Reads every frame the decoder has ready.
    private func receiveFrames(into output: inout DecodeOutput) {
        while true {
            let status = avcodec_receive_frame(codecContext, frame)
            if status == ft_averror_eagain() || status == ft_averror_eof() { return }
            if status < 0 {
                record(DecodeError(averror: status, "libavcodec could not output a picture"), in: &output)
                return
            }
            do {
                let picture = try wrapReceivedFrame()
                output.frames.append(picture)
                if picture.decodedBy == .software { noteDecodedInSoftware(picture, into: &output) }
            } catch {
                record(error, in: &output)
            }
        }
    }

    /// Moves the received picture into a `DecodedFrame`. A hardware picture stays on the device
    /// (downloaded when first read); at most `deviceFramesHeld` of them at a time. Leaves
    /// `frame` empty for the next `avcodec_receive_frame`.
    private func wrapReceivedFrame() throws(DecodeError) -> DecodedFrame {
        defer { av_frame_unref(frame) }
        guard let owned = av_frame_alloc() else {
            throw DecodeError(.allocationFailed, "av_frame_alloc")
        }
        av_frame_move_ref(owned, frame)
        // Handed over whole: libavcodec keeps no reference to this AVFrame (`frame` was just
        // emptied into it), so from here only the DecodedFrame touches it. The region checker
        // cannot see that through the C call, hence the one explicit hand-over.
        nonisolated(unsafe) let handedOver = owned
        framesDecoded += 1
        let pts = owned.pointee.pts == ft_av_nopts_value() ? nil : owned.pointee.pts
        let format = AVPixelFormat(owned.pointee.format)
        if format == AV_PIX_FMT_CUDA || format == AV_PIX_FMT_VAAPI {
            let picture = DecodedFrame(
                takingSurface: handedOver, softwareFormat: codecContext.pointee.sw_pix_fmt,
                decodedBy: format == AV_PIX_FMT_CUDA ? .cuda : .vaapi, pts: pts, downloads: options.frameDownloads,
                flagsUnrecovered: flagsUnrecovered)
            deviceFrames.admit(picture)
            return picture
        }
        return DecodedFrame(
            taking: handedOver, pts: pts, downloads: options.frameDownloads, flagsUnrecovered: flagsUnrecovered)
    }

    /// A hardware decoder whose picture came out in system memory: libavcodec decoded it in
    /// software (its hwaccel did not start, e.g. NVDEC below its smallest size, and it went on
    /// without one). Said once per decoder; the supervisor records it.
    private func noteDecodedInSoftware(_ picture: DecodedFrame, into output: inout DecodeOutput) {
        guard let hardware, !reportedDecodedInSoftware else { return }
        reportedDecodedInSoftware = true
        let profile = avcodec_profile_name(codecContext.pointee.codec_id, codecContext.pointee.profile)
            .map { String(cString: $0) } ?? "profile \(codecContext.pointee.profile)"
        output.decodedInSoftware = HardwareCapability.Refusal(
            reason: .decodedInSoftware,
            message: "\(hardware.negotiation.hardwareKind.engineName) on \(hardware.negotiation.device) refused "
                + "\(codec.displayName) \(profile) \(picture.width)x\(picture.height); libavcodec decoded it in software")
    }

    private func record(_ error: DecodeError, in output: inout DecodeOutput) {
        decodeErrors += 1
        lastError = error
        output.errors.append(error)
    }

    /// Puts the held-back bytes and then `bytes` into `paddedInput` and returns how many of them
    /// the parser may see now; zeroed padding follows those.
    ///
    /// libavcodec 5.1's H.264 parser misplaces a picture boundary when one call ends inside a
    /// start code, the NAL header or the first bytes of the slice header that begins the next
    /// picture (measured: splitting right after `00 00`, `00 00 01` or the NAL header byte lost
    /// or corrupted pictures; feeding 1 byte at a time kept 2 of 20). So the bytes from such a
    /// start code on (at most ~21) wait for the next call, which makes the output independent of
    /// how the caller chunks the stream and equal to parsing the whole file at once.
    private func stage(
        _ bytes: UnsafeRawBufferPointer, holdingBackUnsafeTail: Bool
    ) -> (UnsafeMutablePointer<UInt8>, Int) {
        let padding = Int(AV_INPUT_BUFFER_PADDING_SIZE)
        let total = heldBack.count + bytes.count
        if paddedInput.count < total + padding {
            paddedInput.deallocate()
            paddedInput = .allocate(byteCount: total + padding, alignment: 64)
        }
        let base = paddedInput.baseAddress!.assumingMemoryBound(to: UInt8.self)
        if !heldBack.isEmpty {
            heldBack.withUnsafeBufferPointer { base.update(from: $0.baseAddress!, count: $0.count) }
        }
        if let source = bytes.baseAddress, bytes.count > 0 {
            UnsafeMutableRawPointer(base + heldBack.count).copyMemory(from: source, byteCount: bytes.count)
        }
        let ready = holdingBackUnsafeTail ? total - unsafeTailLength(base, count: total) : total
        heldBack = Array(UnsafeBufferPointer(start: base + ready, count: total - ready))
        (base + ready).initialize(repeating: 0, count: padding)
        return (base, ready)
    }

    /// Length of the tail that must not end a parser call: from a start code whose first 16
    /// following bytes have not all arrived (with its leading zero), or up to two trailing zero
    /// bytes that may begin a start code.
    private func unsafeTailLength(_ bytes: UnsafePointer<UInt8>, count: Int) -> Int {
        var cut = count
        var index = count - 3
        while index >= max(0, count - 19) {
            if bytes[index] == 0 && bytes[index + 1] == 0 && bytes[index + 2] == 1 {
                cut = index
                break
            }
            index -= 1
        }
        var zeros = 0
        while zeros < 2 && cut - zeros > 0 && bytes[cut - zeros - 1] == 0 {
            zeros += 1
        }
        return count - (cut - zeros)
    }
}

/// One access unit as the parser cut it; `data` points into the parser's (or the probe's) buffer.
private struct ParsedUnit {
    var data: UnsafeMutablePointer<UInt8>
    var size: Int32
    var pts: Int64
    var dts: Int64
    var isKey: Bool
    /// What the picture's `reordered_opaque` carries out: the caller's access unit index, or
    /// `AV_NOPTS_VALUE` for none.
    var opaque: Int64
    /// The reference to `data`'s buffer the packet takes over, when it has one.
    var buffer: UnsafeMutablePointer<AVBufferRef>? = nil
}

/// Reference-counted buffers access units are copied into for libavcodec. A packet with a
/// buffer is kept by reference (`av_packet_ref`); one without is copied into memory allocated
/// for it, for every access unit. These are reused as soon as the decoder let go of them (it
/// holds one packet, more with frame threads), so a stream's packets cost no fresh memory.
private struct PacketBuffers {
    /// Buffers kept for reuse, each holding this struct's reference.
    private var kept: [UnsafeMutablePointer<AVBufferRef>] = []
    /// Enough for one packet in flight per frame thread and one being filled.
    static let keptAtMost = 8
    /// A new buffer's least size: most access units fit, so few are ever replaced.
    static let smallestBuffer = 256 << 10
    /// The largest buffer kept for reuse.
    static let largestKept = 4 << 20

    /// A new reference to a buffer holding `bytes`, with zeroed padding after them; nil when
    /// no memory could be had.
    mutating func buffer(holding bytes: UnsafeRawBufferPointer) -> UnsafeMutablePointer<AVBufferRef>? {
        let padding = Int(AV_INPUT_BUFFER_PADDING_SIZE)
        let needed = bytes.count + padding
        var reference: UnsafeMutablePointer<AVBufferRef>?
        if needed > Self.largestKept {
            // An unusually large unit (a 4K keyframe): its buffer is not kept for the stream's life.
            reference = av_buffer_alloc(needed)
        } else if let free = kept.firstIndex(where: { av_buffer_is_writable($0) != 0 && Int($0.pointee.size) >= needed }) {
            reference = av_buffer_ref(kept[free])
        } else if let replaced = kept.firstIndex(where: { av_buffer_is_writable($0) != 0 }) {
            // Too small for this unit: grown, so that the stream's largest unit settles in one.
            var old: UnsafeMutablePointer<AVBufferRef>? = kept[replaced]
            av_buffer_unref(&old)
            kept.remove(at: replaced)
            reference = keep(size: max(needed, Self.smallestBuffer))
        } else if kept.count < Self.keptAtMost {
            reference = keep(size: max(needed, Self.smallestBuffer))
        } else {
            reference = av_buffer_alloc(needed)
        }
        guard let reference, let data = reference.pointee.data else { return nil }
        if let source = bytes.baseAddress { UnsafeMutableRawPointer(data).copyMemory(from: source, byteCount: bytes.count) }
        (data + bytes.count).initialize(repeating: 0, count: padding)
        return reference
    }

    /// A new buffer of `size` bytes, kept; a second reference to it for the caller.
    private mutating func keep(size: Int) -> UnsafeMutablePointer<AVBufferRef>? {
        guard let buffer = av_buffer_alloc(size) else { return nil }
        kept.append(buffer)
        return av_buffer_ref(buffer)
    }

    /// Drops the kept references (each buffer is freed once libavcodec dropped its own).
    mutating func release() {
        for buffer in kept {
            var reference: UnsafeMutablePointer<AVBufferRef>? = buffer
            av_buffer_unref(&reference)
        }
        kept = []
    }
}

private struct ReorderProbe {
    let context: UnsafeMutablePointer<AVCodecContext>
    var units: [(bytes: [UInt8], unit: ParsedUnit)] = []
    var bytes = 0
    var framesDecoded = 0
}

extension VideoCodec {
    /// libavcodec's id for the codec.
    var libavID: AVCodecID {
        switch self {
        case .h264: AV_CODEC_ID_H264
        case .h265: AV_CODEC_ID_HEVC
        }
    }

    /// Whether a decoder can start without knowing the reorder delay from the parameter sets:
    /// an H.264 SPS need not state it (the ffmpeg CLI probes it, see
    /// `DecoderOptions.emulateFFmpegProbe`); every H.265 SPS does.
    var reorderDelayNeedsProbing: Bool { self == .h264 }

    /// The bit depths libavcodec 5.1 decodes (h264_ps.c, hevc_ps.c), luma and chroma alike: it
    /// refuses any other SPS ("The following bit-depths are currently specified: 8, 9, 10 and
    /// 12 bits", "Different chroma and luma bit depth") and then fails every picture using it.
    var decodableBitDepths: Set<Int> {
        switch self {
        case .h264: [8, 9, 10, 12, 14]
        case .h265: [8, 9, 10, 12]
        }
    }
}

extension StreamFormat {
    /// Throws `.unsupportedStream` when libavcodec would refuse the SPS this format comes from:
    /// checked before any picture of it reaches a decoder, so such a stream is refused at once
    /// and with its reason, not picture by picture as invalid data.
    public func checkDecodable() throws(DecodeError) {
        let depths = codec.decodableBitDepths
        guard bitDepth == bitDepthChroma && depths.contains(bitDepth) else {
            let listed = depths.sorted().map(String.init).joined(separator: ", ")
            throw DecodeError(
                .unsupportedStream,
                "\(codec.displayName) with \(bitDepth)-bit luma and \(bitDepthChroma)-bit chroma: libavcodec decodes "
                    + "\(listed) bits per sample, the same for luma and chroma")
        }
    }
}
