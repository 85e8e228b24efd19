import FoundationEssentials
import Synchronization
import VideoCoding

#if canImport(Glibc)
    import Glibc
#endif

/// What a decoder for one stream holds in pictures, estimated from its parameter sets before
/// any picture is sent: the memory a hostile 10 KB stream can make the server allocate is
/// known, and admitted against `DecoderMemoryBudget`, before libavcodec allocates it.
///
/// libavcodec keeps a frame pool per decoder that grows to as many pictures as are alive at
/// once and keeps them until the decoder closes. Alive at once: the decoded picture buffer
/// (references and pictures waiting for their output turn), the picture being decoded, one
/// more per extra frame thread, the surfaces a hardware decoder keeps for its callers, and the
/// pictures FrameTap itself holds (the newest, and one being encoded). `StreamDecoder` hands
/// pictures out one at a time, so a push never keeps more alive.
public struct DecoderMemoryEstimate: Sendable, Equatable {
    /// One picture: coded size, luma and chroma planes, bytes per sample.
    public var pictureBytes: Int
    public var pictures: Int
    public var bytes: Int { pictureBytes.multipliedReportingOverflow(by: pictures).overflow ? .max : pictureBytes * pictures }

    /// Pictures FrameTap holds beyond the decoder's own: the newest and one being encoded.
    static let heldByFrameTap = 2

    public init(pictureBytes: Int, pictures: Int) {
        self.pictureBytes = pictureBytes
        self.pictures = pictures
    }

    /// - Parameters:
    ///   - chromaFormat: `chroma_format_idc` (0 monochrome, 1 4:2:0, 2 4:2:2, 3 4:4:4).
    ///   - bufferedPictures: the decoded picture buffer the stream asks for (references and
    ///     reordering), at most 16.
    ///   - onHardware: the decoder decodes on a device, which keeps surfaces for its callers.
    public init(
        codedWidth: Int, codedHeight: Int, chromaFormat: Int, bitDepth: Int, bufferedPictures: Int,
        options: DecoderOptions, onHardware: Bool
    ) {
        let lumaSamples = max(0, codedWidth) * max(0, codedHeight)
        let chromaSamples: Int
        switch chromaFormat {
        case 0: chromaSamples = 0
        case 1: chromaSamples = lumaSamples / 2
        case 2: chromaSamples = lumaSamples
        default: chromaSamples = 2 * lumaSamples
        }
        let sampleBytes = bitDepth > 8 ? 2 : 1
        pictureBytes = (lumaSamples + chromaSamples) * sampleBytes
        // Frame threading adds one picture in flight per extra thread (0 = one per core, plus one).
        let threads = options.threads == 0 ? ProcessInfo.processInfo.activeProcessorCount + 1 : options.threads
        let frameThreads = options.threadType == .slice ? 0 : max(0, threads - 1)
        let hardwareSurfaces = onHardware ? options.deviceFramesHeld + 1 : 0
        pictures = min(16, max(1, bufferedPictures)) + 1 + frameThreads + hardwareSurfaces + Self.heldByFrameTap
    }

    /// For a sequence: its decoded picture buffer, the one decoding, frame threads, hardware
    /// surfaces and FrameTap's two. With the ffmpeg CLI's reorder probe (see
    /// `DecoderOptions.emulateFFmpegProbe`), a second, one-thread decoder holds a buffer too.
    public init(sequence: SequenceFacts, options: DecoderOptions, onHardware: Bool) {
        let format = sequence.format
        self.init(
            codedWidth: format.codedWidth, codedHeight: format.codedHeight, chromaFormat: format.chromaFormatIdc,
            bitDepth: max(format.bitDepth, format.bitDepthChroma), bufferedPictures: sequence.bufferedPictures,
            options: options, onHardware: onHardware)
        let probes = options.emulateFFmpegProbe && format.codec.reorderDelayNeedsProbing
            && !(options.probeOnlyUnannouncedReordering && sequence.reorderDelayAnnounced)
        if probes { pictures += sequence.bufferedPictures + 1 }
    }
}

/// The memory every session's decoder may hold together (`--max-decoder-memory`): a stream is
/// admitted when its estimate fits beside everyone else's, otherwise refused with
/// `decoder_memory_exceeded` before anything is allocated, and other sessions are untouched.
public final class DecoderMemoryBudget: Sendable {
    public let limit: Int
    private let state = Mutex(Usage())

    public struct Usage: Sendable, Equatable {
        public var bytes = 0
        public var decoders = 0
        /// Streams refused so far.
        public var refusals = 0
    }

    public init(limit: Int) {
        self.limit = max(0, limit)
    }

    public var usage: Usage { state.withLock { $0 } }

    /// Reserves `estimate` for one decoder, in place of `replacing` (its earlier share, given
    /// back only when the new one fits), or throws `.decoderMemoryExceeded` with the figures.
    public func reserve(
        _ estimate: DecoderMemoryEstimate, replacing earlier: DecoderMemoryReservation? = nil
    ) throws(DecodeError) -> DecoderMemoryReservation {
        let bytes = estimate.bytes
        let refused = state.withLock { usage -> Usage? in
            let held = earlier?.bytes ?? 0
            guard bytes - held <= limit - usage.bytes else {
                usage.refusals += 1
                return usage
            }
            usage.bytes += bytes
            usage.decoders += 1
            return nil
        }
        if let usage = refused {
            throw DecodeError(
                .decoderMemoryExceeded,
                "decoding this stream needs about \(Self.mebibytes(bytes)) MiB (\(estimate.pictures) pictures of "
                    + "\(Self.mebibytes(estimate.pictureBytes)) MiB); the decoder memory budget is "
                    + "\(Self.mebibytes(limit)) MiB, of which \(Self.mebibytes(usage.bytes)) MiB are held by "
                    + "\(usage.decoders) decoder(s)")
        }
        return DecoderMemoryReservation(bytes: bytes, budget: self)
    }

    fileprivate func release(_ bytes: Int) {
        state.withLock { usage in
            usage.bytes -= bytes
            usage.decoders -= 1
        }
    }

    static func mebibytes(_ bytes: Int) -> String {
        let tenths = (bytes * 10 + (1 << 19)) >> 20
        return tenths % 10 == 0 ? "\(tenths / 10)" : "\(tenths / 10).\(tenths % 10)"
    }

    /// Half of what this process may use (`MemoryLimit.ofThisProcess`). The other half is for
    /// everything else: the sessions' histories (a quarter, `--max-history-memory`), encoded
    /// pictures, upload queues, spools in the page cache, the HTTP server.
    public static func defaultLimit() -> Int {
        MemoryLimit.ofThisProcess() / 2
    }
}

/// What this process may use: the container's memory limit (cgroup v2 `memory.max`, or v1
/// `memory.limit_in_bytes`) when there is one, else the machine's memory. The automatic
/// budgets are shares of it.
public enum MemoryLimit {
    public static func ofThisProcess() -> Int {
        let machine = physicalMemory() ?? (8 << 30)
        return containerMemoryLimit().map { min($0, machine) } ?? machine
    }

    static func physicalMemory() -> Int? {
        let pages = sysconf(Int32(_SC_PHYS_PAGES))
        let pageSize = sysconf(Int32(_SC_PAGESIZE))
        guard pages > 0, pageSize > 0 else { return nil }
        return pages * pageSize
    }

    static func containerMemoryLimit() -> Int? {
        for path in ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"] {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            let value = text.split(whereSeparator: \.isWhitespace).first.map(String.init) ?? ""
            // "max" (v2) or a huge number (v1, no limit) mean none.
            if let bytes = Int(value), bytes > 0, bytes < 1 << 60 { return bytes }
        }
        return nil
    }
}

/// One decoder's share of the budget, given back when it is dropped.
public final class DecoderMemoryReservation: Sendable {
    public let bytes: Int
    private let budget: DecoderMemoryBudget

    fileprivate init(bytes: Int, budget: DecoderMemoryBudget) {
        self.bytes = bytes
        self.budget = budget
    }

    deinit { budget.release(bytes) }
}
