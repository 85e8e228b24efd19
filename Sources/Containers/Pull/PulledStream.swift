import CFFmpeg

/// How an RTSP source sends its media (RTP over the RTSP connection, or over UDP).
public enum SourceTransport: String, Sendable, CaseIterable {
    case tcp, udp
}

/// What a pulled stream read next.
public enum PulledOutput: Sendable {
    /// A sample of the video track.
    case sample(DemuxedSample)
    /// Bytes of an Annex B elementary stream (an HTTP source that is not a container).
    case bytes([UInt8])
    /// The source ended its stream.
    case end
    case failed(ContainerError)
}

/// One connection to a source, read on the pulling thread, opened as its scheme's row in
/// `PullScheme.all` says: RTSP, RTMP and SRT through libavformat's protocols and demuxers,
/// fenced in (`LibavFence`), RTSP and RTMP behind FrameTap's relay of their connection
/// (`SourceRelay`); HTTP(S) through FrameTap's own GET (`HTTPSourceInput`) and then, like a
/// push, a container's demuxer or the Annex B bytes as they are. libavformat is only ever
/// given a URL rebuilt from the checked parts. Reconnecting is the caller's business: a failed
/// or ended stream is not reused.
public final class PulledStream {
    public struct Timeouts: Sendable, Equatable {
        /// Connecting and reading the stream's header.
        public var connect: Duration
        /// Waiting for the next packet once the stream runs.
        public var read: Duration

        public init(connect: Duration, read: Duration) {
            self.connect = connect
            self.read = read
        }
    }

    private enum Reader {
        case demuxer(Demuxer)
        case elementary(any DemuxByteInput)
    }

    private let reader: Reader
    /// RTSP and RTMP: ends the relay the demuxer talks to the source through.
    private let stopRelay: (@Sendable () -> Void)?
    /// Counted for an RTMP relay's budget.
    private let pictures = DeliveredPictures()
    private let interrupt: DemuxInterrupt
    private let timeouts: Timeouts
    /// When an Annex B body last made a whole access unit (or opened): uptime.
    private var annexBProgressAt: UInt64 = 0
    /// What the source is read as: `rtsp`, `flv`, `mpegts`, `annexb`, ...
    public let formatName: String

    /// Connects to `source` and reads its header (blocking, up to the connect timeout).
    /// `policy` judges every other address the source leads to (HTTP and RTSP redirects, RTSP
    /// media addresses) before anything is sent there.
    public init(
        source: SourceURL, transport: SourceTransport?, policy: SourcePolicy, interrupt: DemuxInterrupt,
        timeouts: Timeouts, seekWindow: Int
    ) throws(ContainerError) {
        self.interrupt = interrupt
        self.timeouts = timeouts
        interrupt.setTimeout(timeouts.connect)
        switch source.scheme.opening {
        case .httpGet:
            stopRelay = nil
            let input = try HTTPSourceInput(
                url: source, check: { policy.check($0) }, interrupt: interrupt, connectTimeout: timeouts.connect)
            interrupt.setTimeout(timeouts.connect)
            // The first bytes tell, as for a push: a web server's Content-Type comes from a file's
            // name (an FLV saved as .ts is served as video/mp2t), so it only decides where the
            // bytes do not. A body that sends nothing runs into the connect timeout here.
            var prefix: [UInt8] = []
            var sniffed = SniffedContent.needMoreBytes
            var buffer = [UInt8](repeating: 0, count: Sniffer.decisiveLength)
            sniffing: while prefix.count < Sniffer.decisiveLength {
                let wanted = Sniffer.decisiveLength - prefix.count
                let result = buffer.withUnsafeMutableBytes { input.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<wanted])) }
                switch result {
                case .bytes(let count): prefix += buffer.prefix(count)
                case .end: break sniffing
                case .interrupted: throw Self.interruption(interrupt, "the source")
                }
                sniffed = Sniffer.sniff(prefix[...], complete: false)
                if sniffed != .needMoreBytes { break sniffing }
            }
            if sniffed == .needMoreBytes { sniffed = Sniffer.sniff(prefix[...], complete: true) }
            let declared = input.contentType.flatMap(ContainerFormat.init(mediaType:))
            let format: ContainerFormat? =
                switch sniffed {
                case .container(let found): found
                // A start code is Annex B whatever the label, unless it is the size of an MP4 box
                // the sniffer does not know (`uuid`, `emsg`: 256 to 511 bytes long); other bytes
                // are the label's to read.
                case .elementaryStream, .needMoreBytes:
                    (prefix.starts(with: [0, 0, 1]) || prefix.starts(with: [0, 0, 0, 1])) && Sniffer.boxType(prefix[...]) == nil
                        ? nil : declared
                }
            let body = PrefixedInput(prefix: prefix, rest: input)
            if let format {
                reader = .demuxer(try Demuxer(container: format, input: body, seekWindow: seekWindow, interrupt: interrupt))
                formatName = format.demuxerName
            } else {
                reader = .elementary(body)
                formatName = "annexb"
            }
            // Open within the connect timeout as a whole, however the bytes trickle in; then each
            // whole packet within the read timeout (`next()`).
            annexBProgressAt = interrupt.uptime
        case .libavformat(let opening):
            var options = opening.options
            if let option = opening.transportOption {
                options[option] = (transport ?? source.scheme.transports[0]).rawValue
            }
            var url = source.openedText()
            switch opening.relay {
            case .rtspControl:
                let relay = try SourceRelay(source: source, policy: policy, interrupt: interrupt) { target, connected, host, port in
                    RTSPAnswerCheck(current: target, connectedAddress: connected, policy: policy, relayHost: host, relayPort: port)
                }
                url = relay.localURL
                stopRelay = { relay.stop() }
            case .rtmpConnection:
                let pictures = self.pictures
                let relay = try SourceRelay(source: source, policy: policy, interrupt: interrupt) { _, _, _, _ in
                    RTMPByteBudget(pictures: pictures)
                }
                url = relay.localURL
                if let tcURL = RTMPConnectURL.tcURL(of: source) { options["rtmp_tcurl"] = tcURL }
                stopRelay = { relay.stop() }
            case nil:
                stopRelay = nil
            }
            let demuxer: Demuxer
            do {
                demuxer = try Demuxer(url: url, fence: opening.fence, options: options, interrupt: interrupt)
            } catch {
                stopRelay?()
                throw Self.explained(error, scheme: source.scheme)
            }
            reader = .demuxer(demuxer)
            formatName = demuxer.formatName
        }
    }

    deinit {
        // The demuxer ends its session (an RTSP TEARDOWN goes through the relay) before the relay.
        if case .demuxer(let demuxer) = reader { demuxer.close() }
        stopRelay?()
    }

    /// An Annex B body made a whole access unit.
    public func progressed() {
        annexBProgressAt = interrupt.uptime
    }

    /// Packets of other tracks left out so far, by kind.
    public var ignoredPackets: [String: Int] {
        if case .demuxer(let demuxer) = reader { return demuxer.ignoredPackets }
        return [:]
    }

    /// The next sample, blocking up to the read timeout; or the next bytes of an Annex B body,
    /// blocking up to the read timeout but never past twice it after the last access unit
    /// (`progressed()`): a unit is known whole only when the next one begins, and a body that
    /// trickles bytes without ever making one is lost.
    public func next() -> PulledOutput {
        switch reader {
        case .demuxer(let demuxer):
            interrupt.setTimeout(timeouts.read)
            switch demuxer.next() {
            case .sample(let sample):
                pictures.add()
                return .sample(sample)
            case .end: return .end
            case .failed(let error): return .failed(error)
            }
        case .elementary(let input):
            interrupt.setTimeout(timeouts.read, notAfter: annexBProgressAt &+ 2 * timeouts.read.nanoseconds)
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            let result = buffer.withUnsafeMutableBytes { input.read(into: $0) }
            switch result {
            case .bytes(let count): return .bytes(Array(buffer.prefix(count)))
            case .end: return interrupt.reason == nil ? .end : .failed(Self.interruption(interrupt, "the source"))
            case .interrupted: return .failed(Self.interruption(interrupt, "the source"))
            }
        }
    }

    /// libsrt says only "Input/output error" when a call is not taken, whether nobody listens
    /// or the listener refused this caller: the message says what it may be.
    private static func explained(_ error: ContainerError, scheme: PullScheme) -> ContainerError {
        guard scheme == .srt, error.code == .sourceFailed, error.message.hasSuffix(libavErrorString(ft_averror(EIO))) else {
            return error
        }
        return ContainerError(
            .sourceFailed,
            "the SRT listener did not take the call: it is not running or not reachable, or it refused this caller "
                + "(a wrong passphrase or streamid reads the same) [\(error.message)]")
    }

    private static func interruption(_ interrupt: DemuxInterrupt, _ what: String) -> ContainerError {
        switch interrupt.reason {
        case .refused(let error): return error
        case .timedOut: return ContainerError(.sourceTimeout, "\(what) sent nothing in time")
        case .stopped, .letGo, nil: return ContainerError(.sourceEnded, "stopped")
        }
    }
}
