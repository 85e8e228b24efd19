import Containers
import Decoding
import Foundation
@testable import FrameTapAPI
import H264
import HTTPServer
import Imaging
import Logging
@testable import Ingest
@testable import Sessions
import SessionCatalog
import SessionsTestSupport
import Testing
import TestSupport
import VideoCoding
import Timekeeping

/// The published JSON, byte for byte: every resource's shape with its explicit nulls and
/// omitted members, as clients have seen it. No sockets: each value is built and encoded here.
@Suite(.timeLimit(.minutes(10))) struct WireFormatTests {
    static let createdAt = Date(timeIntervalSince1970: 1_767_225_600.125)
    static let laterAt = Date(timeIntervalSince1970: 1_767_225_661.5)

    /// The format of a fixture's first SPS.
    static func format(_ fixture: String) throws -> StreamFormat {
        var splitter = AnnexBSplitter()
        var found: StreamFormat?
        func take(_ event: SplitterEvent) {
            guard found == nil, case .unit(let unit) = event, NALUnit(unit).type == .sps,
                let sps = try? SequenceParameterSet(nal: NALUnit(unit))
            else { return }
            found = StreamFormat(sps: sps)
        }
        splitter.push(try Fixtures.bytes(fixture), take)
        splitter.finish(take)
        return try #require(found)
    }

    /// A format the stream says little about: no frame rate, no aspect ratio (both left out).
    static func unsignalledFormat() throws -> StreamFormat {
        var format = try format("odd_crop_322x242.264")
        format.frameRate = nil
        format.sampleAspectRatio = nil
        return format
    }

    static func busyStatus() throws -> SessionStatus {
        var counters = SessionCounters()
        counters.bytes = 123_456
        counters.nalUnits = ["sps": 1, "pps": 1, "idr": 2, "slice": 58]
        counters.accessUnits = 60
        counters.framesDecoded = 59
        counters.framesDroppedBeforeKeyframe = 1
        counters.framesRejectedTooLarge = 0
        counters.framesSkippedNotKeyframe = 3
        counters.decodeErrors = 2
        counters.uploadsAborted = 1
        counters.uploadsTakenOver = 2
        return SessionStatus(
            id: try SessionID("cam-1"), codec: .h264, codecStated: true, statedCodec: .h264, backend: .software,
            backendReason: "software: NVDEC cannot decode \"High 4:4:4\"; fell back",
            encoder: PictureEncoderIdentity(name: "nvjpeg", reason: "--encoder auto: a GPU"),
            device: .renderNode("/dev/dri/renderD128"),
            fallbacks: [
                BackendFallback(
                    reason: .unsupportedChroma, codec: .h264, from: .cuda, to: .vaapi, device: .cuda(0),
                    message: "NVDEC cannot decode High 4:4:4 Predictive (4:4:4 chroma)"),
                BackendFallback(
                    reason: .deviceErrors, codec: .h264, from: .vaapi, to: .software, message: "8 access units failed in a row",
                    afterFrames: 120),
            ],
            decode: .keyframes, decoder: .live, quality: 70, createdAt: createdAt, lastActivityAt: laterAt,
            format: try format("high_320x240.264"), counters: counters,
            latestFrame: LatestFrameInfo(seq: 59, pts: 3600, keyframe: true, width: 320, height: 240, ageMs: 41),
            lastError: ErrorRecord(code: "invalid_data", message: "slice header damaged at 4/5", at: laterAt),
            subscribers: 2, uploading: true, hold: .publisher("phone-7"),
            rates: SessionRates(picturesPerSecond: 29.97, bitsPerSecond: 1_234_567.5, windowSeconds: 4.25),
            source: SourceStatus(
                url: "rtsp://***@10.0.0.7:554/stream1", transport: .tcp, state: .retrying,
                lastError: ErrorRecord(code: "source_timeout", message: "the source sent nothing in time", at: laterAt),
                reconnects: 3, failures: 4, connectedAt: nil, format: "rtsp", nextAttemptAt: laterAt),
            owner: try SessionOwner("frametap-sync"), ignoredPackets: ["audio": 7],
            standing: .declared)
    }

    static func freshStatus() throws -> SessionStatus {
        SessionStatus(
            id: try SessionID("lobby"), codec: nil, codecStated: false, backend: .software, backendReason: "software: chosen",
            encoder: PictureEncoderIdentity(name: "turbojpeg", reason: "chosen by --encoder turbojpeg"), device: nil,
            fallbacks: [], decode: .onDemand, decoder: .idle, quality: 85, createdAt: createdAt, lastActivityAt: createdAt,
            format: nil,
            counters: SessionCounters(),
            latestFrame: LatestFrameInfo(seq: 1, pts: nil, keyframe: false, width: 176, height: 144, ageMs: 0),
            lastError: nil, subscribers: 0, uploading: false,
            rates: SessionRates(picturesPerSecond: 0, bitsPerSecond: 0, windowSeconds: 1),
            standing: SessionStanding(origin: .api, persisted: true))
    }

    static let highFormatJSON =
        #"{"bitDepth":8,"bitDepthChroma":8,"chromaFormat":"4:2:0","codec":"h264","codedHeight":240,"codedWidth":320,"#
        + #""colorPrimaries":"unspecified","crop":{"bottom":0,"left":0,"right":0,"top":0},"frameRate":25,"#
        + #""fullRange":false,"height":240,"interlaced":false,"level":"1.3","matrix":"unspecified","profile":"High","#
        + #""profileIdc":100,"sampleAspectRatio":"1:1","transfer":"unspecified","width":320}"#

    static let busyStatusJSON =
        #"{"backend":"software","backendReason":"software: NVDEC cannot decode \"High 4:4:4\"; fell back","#
        + #""codec":"h264","codecStated":true,"#
        + #""counters":{"accessUnits":60,"bytes":123456,"decodeErrors":2,"framesDecoded":59,"#
        + #""framesDroppedBeforeKeyframe":1,"framesRejectedTooLarge":0,"framesSkippedLeading":0,"#
        + #""framesSkippedNotKeyframe":3,"nalUnits":{"idr":2,"pps":1,"slice":58,"sps":1},"packetsIgnored":{"audio":7},"#
        + #""unitsOutsideBaseLayer":0,"uploadsAborted":1,"uploadsTakenOver":2},"#
        + #""createdAt":"2026-01-01T00:00:00.125Z","decode":"keyframes","decoder":"live","decoding":true,"#
        + #""device":"/dev/dri/renderD128","encoder":{"name":"nvjpeg","reason":"--encoder auto: a GPU"},"#
        + #""fallbacks":[{"afterFrames":0,"codec":"h264","device":"cuda:0","from":"cuda","#
        + #""message":"NVDEC cannot decode High 4:4:4 Predictive (4:4:4 chroma)","reason":"unsupported_chroma","to":"vaapi"},"#
        + #"{"afterFrames":120,"codec":"h264","device":null,"from":"vaapi","message":"8 access units failed in a row","#
        + #""reason":"device_errors","to":"software"}],"format":"# + highFormatJSON + #","heldBy":"publisher","id":"cam-1","#
        + #""lastActivityAt":"2026-01-01T00:01:01.500Z","#
        + #""lastError":{"at":"2026-01-01T00:01:01.500Z","code":"invalid_data","message":"slice header damaged at 4/5"},"#
        + #""latestFrame":{"ageMs":41,"height":240,"keyframe":true,"pts":3600,"seq":59,"width":320},"#
        + #""origin":"declared","owner":"frametap-sync","persisted":false,"publisher":"phone-7","quality":70,"#
        + #""rates":{"bitsPerSecond":1234567.5,"picturesPerSecond":29.97,"windowSeconds":4.25},"#
        + #""source":{"connect":"always","connectedAt":null,"failures":4,"format":"rtsp","#
        + #""lastError":{"at":"2026-01-01T00:01:01.500Z","code":"source_timeout","message":"the source sent nothing in time"},"#
        + #""nextAttemptAt":"2026-01-01T00:01:01.500Z","reconnects":3,"state":"retrying","transport":"tcp","#
        + #""url":"rtsp://***@10.0.0.7:554/stream1"},"statedCodec":"h264","subscribers":2,"uploading":true}"#

    static let freshStatusJSON =
        #"{"backend":"software","backendReason":"software: chosen","codec":null,"codecStated":false,"#
        + #""counters":{"accessUnits":0,"bytes":0,"#
        + #""decodeErrors":0,"framesDecoded":0,"framesDroppedBeforeKeyframe":0,"framesRejectedTooLarge":0,"#
        + #""framesSkippedLeading":0,"framesSkippedNotKeyframe":0,"nalUnits":{},"packetsIgnored":{},"unitsOutsideBaseLayer":0,"#
        + #""uploadsAborted":0,"uploadsTakenOver":0},"createdAt":"2026-01-01T00:00:00.125Z","#
        + #""decode":"on-demand","decoder":"idle","decoding":false,"device":null,"#
        + #""encoder":{"name":"turbojpeg","reason":"chosen by --encoder turbojpeg"},"fallbacks":[],"format":null,"heldBy":null,"id":"lobby","#
        + #""lastActivityAt":"2026-01-01T00:00:00.125Z","lastError":null,"#
        + #""latestFrame":{"ageMs":0,"height":144,"keyframe":false,"pts":null,"seq":1,"width":176},"#
        + #""origin":"api","owner":null,"persisted":true,"publisher":null,"quality":85,"#
        + #""rates":{"bitsPerSecond":0,"picturesPerSecond":0,"windowSeconds":1},"source":null,"statedCodec":null,"subscribers":0,"uploading":false}"#

    /// An H.265 format names its codec and tier (H.264 has no tier, so it is left out there).
    /// Timestamps are Foundation's ISO 8601 with milliseconds, character for character, and
    /// HTTP dates RFC 9110's IMF-fixdate. The random dates are made as `Date()` makes them, 0.1 ms
    /// past a millisecond, where taking the millisecond below (FrameTap's rule, see `UTCTime`)
    /// and rounding to the nearest agree.
    @Test func timestampsAndHTTPDates() {
        var generator = SystemRandomNumberGenerator()
        let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        let unixToReference = 978_307_200.0
        let random = (0..<5000).map { _ in
            let millisecond = Double(Int64.random(in: 0...4_102_444_800_000, using: &generator))
            return Date(timeIntervalSinceReferenceDate: (millisecond / 1000).rounded(.down) - unixToReference
                + (millisecond.truncatingRemainder(dividingBy: 1000) + 0.1) / 1000)
        }
        let dates = [Self.createdAt, Self.laterAt, Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 951_782_400.999_9)]
            + random
        for date in dates {
            #expect(WireJSON.timestamp(date) == date.formatted(style), "\(date.timeIntervalSince1970)")
        }
        #expect(WireJSON.timestamp(Self.createdAt) == "2026-01-01T00:00:00.125Z")
        #expect(HTTPDate.string(secondsSince1970: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.string(secondsSince1970: 951_782_400) == "Tue, 29 Feb 2000 00:00:00 GMT")
        #expect(HTTPDate.string(secondsSince1970: 0) == "Thu, 01 Jan 1970 00:00:00 GMT")
    }

    @Test func hevcFormat() throws {
        var display = VUIDisplayParameters()
        display.videoFullRange = true
        display.colourPrimaries = 1
        let format = StreamFormat(
            codec: .h265, codedWidth: 320, codedHeight: 240, crop: .init(left: 0, right: 0, top: 0, bottom: 0),
            profile: "Main 10", profileIdc: 2, tier: "Main", level: "2.1", chromaFormatIdc: 1, bitDepth: 10,
            bitDepthChroma: 10, interlaced: false, frameRate: 25, display: display)
        #expect(
            text(WireJSON.bytes(StreamFormatJSON(format)))
                == #"{"bitDepth":10,"bitDepthChroma":10,"chromaFormat":"4:2:0","codec":"h265","codedHeight":240,"#
                + #""codedWidth":320,"colorPrimaries":"bt709","crop":{"bottom":0,"left":0,"right":0,"top":0},"#
                + #""frameRate":25,"fullRange":true,"height":240,"interlaced":false,"level":"2.1","#
                + #""matrix":"unspecified","profile":"Main 10","profileIdc":2,"tier":"Main","transfer":"unspecified","#
                + #""width":320}"#)
    }

    @Test func sessionStatus() throws {
        #expect(text(WireJSON.bytes(SessionStatusJSON(try Self.busyStatus()))) == Self.busyStatusJSON)
        #expect(text(WireJSON.bytes(SessionStatusJSON(try Self.freshStatus()))) == Self.freshStatusJSON)
    }

    @Test func sessionList() throws {
        let list = SessionList(sessions: [try Self.busyStatus(), try Self.freshStatus()])
        #expect(text(WireJSON.bytes(SessionListJSON(list))) == #"{"sessions":["# + Self.busyStatusJSON + "," + Self.freshStatusJSON + "]}")
        #expect(text(WireJSON.bytes(SessionListJSON(SessionList(sessions: [])))) == #"{"sessions":[]}"#)
    }

    @Test func uploadSummary() throws {
        let decoded = UploadSummary(
            session: try SessionID("cam-1"), bytes: 4096, nalUnits: ["idr": 1, "slice": 3], frames: 4, latestSeq: 17,
            format: try Self.unsignalledFormat(), decodeErrors: 1,
            error: ErrorRecord(code: "nal_too_large", message: "NAL unit of 9000 bytes dropped", at: Self.createdAt),
            flushed: true)
        #expect(
            text(WireJSON.bytes(UploadSummaryJSON(decoded)))
                == #"{"bytes":4096,"decodeErrors":1,"error":{"at":"2026-01-01T00:00:00.125Z","code":"nal_too_large","#
                + #""message":"NAL unit of 9000 bytes dropped"},"flushed":true,"format":{"bitDepth":8,"bitDepthChroma":8,"#
                + #""chromaFormat":"4:2:0","codec":"h264","codedHeight":256,"codedWidth":336,"colorPrimaries":"unspecified","#
                + #""crop":{"bottom":14,"left":0,"right":14,"top":0},"fullRange":false,"height":242,"interlaced":false,"#
                + #""level":"1.3","matrix":"unspecified","profile":"High","profileIdc":100,"transfer":"unspecified","#
                + #""width":322},"frames":4,"latestSeq":17,"nalUnits":{"idr":1,"slice":3},"session":"cam-1"}"#)
        let empty = UploadSummary(
            session: try SessionID("lobby"), bytes: 0, nalUnits: [:], frames: 0, latestSeq: nil, format: nil,
            decodeErrors: 0, error: nil, flushed: false)
        #expect(
            text(WireJSON.bytes(UploadSummaryJSON(empty)))
                == #"{"bytes":0,"decodeErrors":0,"error":null,"flushed":false,"format":null,"frames":0,"#
                + #""latestSeq":null,"nalUnits":{},"session":"lobby"}"#)
    }

    /// A clock standing still: events get known ids and times.
    struct StillClock: ServiceClock {
        var uptime: UInt64 { 5_000_000_000 }
        var now: Date { WireFormatTests.createdAt }
        func schedule(at deadline: UInt64, _ action: @escaping @Sendable () -> Void) {}
    }

    @Test func serverSentEvents() throws {
        let log = SessionEventLog(clock: StillClock())
        let start = log.newestID
        let cam = try SessionID("cam-1")
        func details(_ fill: (inout SessionEventDetails) -> Void) -> SessionEventDetails {
            var details = SessionEventDetails()
            fill(&details)
            return details
        }
        log.publish(.sessionCreated, session: cam, details: details {
            $0.backend = "software"
            $0.decode = "all"
            $0.reason = "software: chosen"
        })
        log.publish(.uploadStarted, session: cam, details: details { $0.multipart = true })
        log.publish(.formatChanged, session: cam, details: details { $0.format = try? Self.unsignalledFormat() })
        log.publish(.pictureFirst, session: cam, details: details {
            $0.seq = 1
            $0.width = 322
            $0.height = 242
        })
        log.publish(.backendSelected, session: cam, details: details {
            $0.backend = "vaapi"
            $0.device = "/dev/dri/renderD128"
            $0.fallback = true
            $0.reason = "unsupported_chroma"
            $0.message = "NVDEC cannot decode \"4:4:4\""
        })
        log.publish(.error, session: cam, details: details {
            $0.code = "invalid_data"
            $0.message = "slice header damaged"
        })
        log.publish(.uploadEnded, session: cam, details: details {
            $0.result = "ok"
            $0.bytes = 4096
            $0.frames = 4
        })
        log.publish(.viewersChanged, session: cam, details: details {
            $0.viewers = 1
            $0.waiting = 0
        })
        log.publish(.sessionRemoved, session: cam, details: details { $0.reason = "deleted" })
        guard case .events(let events, _) = log.read(after: start) else {
            Issue.record("expected events")
            return
        }
        let first = start + 1
        let at = #""at":"2026-01-01T00:00:00.125Z""#
        let expected = [
            #"event: session.created\#ndata: {\#(at),"backend":"software","decode":"all","reason":"software: chosen","session":"cam-1"}"#,
            #"event: upload.started\#ndata: {\#(at),"multipart":true,"session":"cam-1"}"#,
            #"event: format.changed\#ndata: {\#(at),"format":{"bitDepth":8,"bitDepthChroma":8,"chromaFormat":"4:2:0","#
                + #""codec":"h264","codedHeight":256,"codedWidth":336,"colorPrimaries":"unspecified","crop":{"bottom":14,"left":0,"#
                + #""right":14,"top":0},"fullRange":false,"height":242,"interlaced":false,"level":"1.3","#
                + #""matrix":"unspecified","profile":"High","profileIdc":100,"transfer":"unspecified","width":322},"#
                + #""session":"cam-1"}"#,
            #"event: picture.first\#ndata: {\#(at),"height":242,"seq":1,"session":"cam-1","width":322}"#,
            #"event: backend.selected\#ndata: {\#(at),"backend":"vaapi","device":"/dev/dri/renderD128","fallback":true,"#
                + #""message":"NVDEC cannot decode \"4:4:4\"","reason":"unsupported_chroma","session":"cam-1"}"#,
            #"event: session.error\#ndata: {\#(at),"code":"invalid_data","message":"slice header damaged","session":"cam-1"}"#,
            #"event: upload.ended\#ndata: {\#(at),"bytes":4096,"frames":4,"result":"ok","session":"cam-1"}"#,
            #"event: viewers.changed\#ndata: {\#(at),"session":"cam-1","viewers":1,"waiting":0}"#,
            #"event: session.removed\#ndata: {\#(at),"reason":"deleted","session":"cam-1"}"#,
        ].enumerated().map { "id: \(first + UInt64($0.offset))\n\($0.element)\n\n" }
        #expect(events.map { text(EventStreamSource.serverSentEvent($0)) } == expected)
        #expect(
            text(EventStreamSource.serverSentEvent(log.resync(newest: 42, reason: "history_lost")))
                == "id: 42\nevent: resync\ndata: {\(at),\"reason\":\"history_lost\"}\n\n")
    }

    @Test("each event is encoded once for all its readers, the same bytes each reader would encode; the newest 2,048 are kept")
    func eventsEncodedOnce() {
        let log = SessionEventLog(capacity: 8192, clock: StillClock())
        var cursor = log.newestID
        let cam = try! SessionID("cam-1")
        for index in 0..<(EncodedEvents.capacity + 10) {
            log.publish(.viewersChanged, session: cam, details: .with { $0.viewers = index })
        }
        var events: [SessionEvent] = []
        while case .events(let batch, let next) = log.read(after: cursor), !batch.isEmpty {
            events += batch
            cursor = next
        }
        #expect(events.count == EncodedEvents.capacity + 10)
        let encoded = EncodedEvents()
        for event in events {
            #expect(encoded.bytes(of: event) == EventStreamSource.serverSentEvent(event))
        }
        #expect(encoded.count == EncodedEvents.capacity)
        guard let newest = events.last else { return }
        #expect(encoded.bytes(of: newest) == EventStreamSource.serverSentEvent(newest))
        #expect(encoded.count == EncodedEvents.capacity)
    }

    static let hardware = HardwareReport(
        libavcodecVersion: "59.37.100", libavcodecVAAPI: true, vaapiHeaderVersion: "1.17.0",
        renderNodes: [
            RenderNodeReport(
                path: "/dev/dri/renderD128", vendor: "Intel iHD driver - 23.1.1", vaapiVersion: "1.17",
                h264Profiles: ["ConstrainedBaseline", "Main", "High"], hevcProfiles: ["Main", "Main10", "Main422_10"]),
            RenderNodeReport(path: "/dev/dri/renderD129", error: "cannot open: Permission denied"),
        ],
        cuda: CUDAReport(
            driverVersion: "12.8", error: nil,
            devices: [
                CUDADeviceReport(
                    device: .cuda(0), index: 0, name: "NVIDIA H100 80GB HBM3", totalMemoryBytes: 85_000_000_000, opened: true),
                CUDADeviceReport(device: .cuda(1), index: 1, error: "cuDeviceGetName failed"),
            ],
            libavcodecNVDEC: true))

    /// NVDEC's codecs on a usable device (this libavcodec has both NVDEC hwaccels); a render
    /// node's from the profiles it lists (HEVC Main422_10 is listed, but FrameTap sends only Main
    /// and Main 10 to VA-API).
    static let hardwareJSON =
        #"{"cuda":{"devices":[{"codecs":[{"chromaFormats":["4:2:0"],"codec":"h264","maxBitDepth":8,"#
        + #""maxCodedHeight":4096,"maxCodedWidth":4096},{"chromaFormats":["4:2:0","4:4:4"],"codec":"h265","maxBitDepth":12,"#
        + #""maxCodedHeight":8192,"maxCodedWidth":8192}],"#
        + #""device":"cuda:0","error":null,"index":0,"name":"NVIDIA H100 80GB HBM3","opened":true,"#
        + #""totalMemoryBytes":85000000000,"usable":true},{"codecs":[],"device":"cuda:1","error":"cuDeviceGetName failed","index":1,"#
        + #""name":null,"opened":null,"totalMemoryBytes":null,"usable":false}],"driverVersion":"12.8","error":null,"#
        + #""libavcodecNVDEC":true},"libavcodecVAAPI":true,"libavcodecVersion":"59.37.100","#
        + #""renderNodes":[{"codecs":[{"chromaFormats":["4:0:0","4:2:0"],"codec":"h264","maxBitDepth":8,"#
        + #""maxCodedHeight":null,"maxCodedWidth":null},{"chromaFormats":["4:2:0"],"codec":"h265","maxBitDepth":10,"#
        + #""maxCodedHeight":null,"maxCodedWidth":null}],"#
        + #""error":null,"h264Profiles":["ConstrainedBaseline","Main","High"],"hevcProfiles":["Main","Main10","Main422_10"],"#
        + #""path":"/dev/dri/renderD128","#
        + #""usable":true,"vaapiVersion":"1.17","vendor":"Intel iHD driver - 23.1.1"},{"codecs":[],"#
        + #""error":"cannot open: Permission denied","#
        + #""h264Profiles":[],"hevcProfiles":[],"path":"/dev/dri/renderD129","usable":false,"vaapiVersion":null,"vendor":null}],"#
        + #""vaapiHeaderVersion":"1.17.0"}"#

    static let deviceUsage = [
        HardwareDeviceUsage(device: .cuda(0), name: "NVIDIA H100 80GB HBM3", state: .open, sessions: 2),
        HardwareDeviceUsage(
            device: .renderNode("/dev/dri/renderD128"), state: .failed, sessions: 0, error: "vaInitialize failed",
            retryInSeconds: 12.5),
        HardwareDeviceUsage(device: .cuda(1), state: .notOpened, sessions: 0),
    ]

    static let deviceUsageJSON =
        #"[{"device":"cuda:0","error":null,"kind":"cuda","name":"NVIDIA H100 80GB HBM3","retryInSeconds":null,"#
        + #""sessions":2,"state":"open"},{"device":"/dev/dri/renderD128","error":"vaInitialize failed","kind":"vaapi","#
        + #""name":null,"retryInSeconds":12.5,"sessions":0,"state":"failed"},{"device":"cuda:1","error":null,"#
        + #""kind":"cuda","name":null,"retryInSeconds":null,"sessions":0,"state":"not_opened"}]"#

    static let engines = [
        EnginePlacement.Report(
            engine: .cpu, capacity: EngineCapacity(fps: [.h264: 1416, .h265: 924], source: "configured"), loadFPS: 354,
            utilization: 0.25, sessions: 12, movedAway: 0),
        EnginePlacement.Report(
            engine: .device(.cuda(0)), capacity: .nvdec, loadFPS: 632, utilization: 0.5, sessions: 21, movedAway: 3),
    ]

    static let enginesJSON =
        #"[{"capacityFps":{"h264":1416,"h265":924},"capacitySource":"configured","engine":"cpu","kind":"cpu","#
        + #""loadFps":354,"movedAway":0,"sessions":12,"utilization":0.25},"#
        + #"{"capacityFps":{"h264":3400,"h265":3800},"capacitySource":"default for NVDEC (H200)","engine":"cuda:0","#
        + #""kind":"cuda","loadFps":632,"movedAway":3,"sessions":21,"utilization":0.5}]"#

    @Test func system() throws {
        var configuration = ServerConfiguration()
        configuration.maxBodyBytes = nil
        configuration.decoderMemoryLimit = 1 << 30
        configuration.historyMemoryLimit = 1 << 29
        let services = SessionServices.forTests(configuration)
        var info = SystemInfo(configuration: configuration, services: services, activeSessions: 3, hardware: Self.hardware)
        info.devices = Self.deviceUsage
        info.engines = Self.engines
        // A file applied at start, then a reading refused: the running configuration is the start's.
        let clock = ManualClock(now: Date(timeIntervalSince1970: 1_767_225_600.5))
        let status = ConfigurationStatus(
            file: "/etc/frametap/frametap.yaml", events: SessionEventLog(clock: clock), metrics: FrameTapMetrics(),
            clock: clock, logger: Logger(label: "wire") { _ in SwiftLogNoOpLogHandler() })
        status.recordApplied(.start, changes: ["created": ["yard"]], restartNeeded: [])
        status.recordRejected(
            .signal,
            ConfigurationStatus.Rejection(
                message: "frametap.yaml:3:3: serve.max-sesions: unknown option (did you mean 'max-sessions'?)",
                file: "/etc/frametap/frametap.yaml", line: 3, column: 3))
        info.configurationFile = SystemInfo.ConfigurationFile(
            status.snapshot,
            stateDirectory: "/var/lib/frametap", declaredSessions: 2, persistedSessions: 5)
        let limits =
            #"{"historyBytes":\#(configuration.historyBytes),"historySeconds":10,"maxBodyBytes":null,"#
            + #""maxCatchupDecoders":\#(configuration.catchUpDecoders),"maxCatchupQueue":\#(services.catchUpPool.queueLimit),"#
            + #""maxNalBytes":\#(configuration.maxNALBytes),"#
            + #""maxPictureHeight":\#(configuration.pictureSizeLimit.maxHeight),"#
            + #""maxPicturePixels":\#(configuration.pictureSizeLimit.maxPixels),"#
            + #""maxPictureWidth":\#(configuration.pictureSizeLimit.maxWidth),"#
            + #""maxSessions":\#(configuration.maxSessions),"maxSessionsPerToken":null,"#
            + #""maxSpoolBytes":\#(configuration.maxSpoolBytes),"#
            + #""maxSpoolTotalBytes":\#(configuration.maxSpoolTotalBytes),"#
            + #""maxWaitMilliseconds":30000,"sessionIdleTimeoutSeconds":300}"#
        let configurationJSON =
            #"{"appliedAt":"2026-01-01T00:00:00.500Z","declaredSessions":2,"file":"/etc/frametap/frametap.yaml","#
            + #""lastReading":{"at":"2026-01-01T00:00:00.500Z","changes":{},"error":{"column":3,"#
            + #""file":"/etc/frametap/frametap.yaml","line":3,"#
            + #""message":"frametap.yaml:3:3: serve.max-sesions: unknown option (did you mean 'max-sessions'?)"},"#
            + #""restartNeeded":[],"result":"rejected","trigger":"signal"},"persistedSessions":5,"#
            + #""readings":{"applied":1,"rejected":1},"stateDirectory":"/var/lib/frametap"}"#
        #expect(
            text(WireJSON.bytes(SystemInfoJSON(info)))
                == #"{"activeSessions":3,"backendDefault":"\#(configuration.backend.rawValue)","#
                + #""configuration":"# + configurationJSON + #","cudaAvailable":true,"#
                + #""decoderMemory":{"decoders":0,"limitBytes":1073741824,"refusals":0,"usedBytes":0},"#
                + #""decoderThreads":\#(configuration.decoderThreads),"devices":"# + Self.deviceUsageJSON + ","
                + #""encoder":{"name":"\#(services.encoderFactory.identity.name)","#
                + #""reason":"\#(services.encoderFactory.identity.reason)"},"#
                + #""engines":"# + Self.enginesJSON + ","
                + #""hardware":"# + Self.hardwareJSON + #","#
                + #""historyMemory":{"gopsShed":0,"histories":0,"limitBytes":536870912,"usedBytes":0},"#
                + #""libavcodec":"59.37.100","limits":"# + limits + ","
                + #""vaapiAvailable":true,"version":"\#(SystemInfo.version)"}"#)
    }

    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
}

/// The hardware shapes' explicit nulls, whatever the values (moved here with the encoding from
/// DecodingTests).
@Suite(.timeLimit(.minutes(10))) struct HardwareWireTests {
    private func object(_ value: some Encodable) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(WireJSON.bytes(value)))
    }

    @Test func cudaDevicesHaveEveryMember() throws {
        let cuda = CUDAReport(
            driverVersion: "12.8", error: nil,
            devices: [
                CUDADeviceReport(device: .cuda(0), index: 0, name: "Pretend GPU", totalMemoryBytes: 80 << 30),
                CUDADeviceReport(device: .cuda(1), index: 1),
            ])
        let json = try #require(try object(CUDAReportJSON(cuda)) as? [String: Any])
        #expect(Set(json.keys) == ["libavcodecNVDEC", "driverVersion", "error", "devices"])
        #expect(json["driverVersion"] as? String == "12.8" && json["error"] is NSNull)
        let devices = try #require(json["devices"] as? [[String: Any]])
        for device in devices {
            #expect(Set(device.keys) == ["device", "index", "name", "totalMemoryBytes", "opened", "codecs", "usable", "error"])
        }
        #expect(devices[0]["device"] as? String == "cuda:0" && devices[0]["name"] as? String == "Pretend GPU")
        #expect(devices[0]["totalMemoryBytes"] as? Int == 80 << 30 && devices[0]["usable"] as? Bool == true)
        #expect(devices[1]["name"] is NSNull && devices[1]["opened"] is NSNull && devices[1]["error"] is NSNull)
    }

    @Test func withoutADriverTheCUDAObjectSaysWhy() throws {
        let cuda = CUDAReport(driverVersion: nil, error: "cannot load the NVIDIA driver", devices: [], libavcodecNVDEC: false)
        let json = try #require(try object(CUDAReportJSON(cuda)) as? [String: Any])
        #expect(json["driverVersion"] is NSNull && json["libavcodecNVDEC"] as? Bool == false)
        #expect((json["devices"] as? [Any])?.isEmpty == true)
        #expect(json["error"] as? String == "cannot load the NVIDIA driver")
    }

    @Test func renderNodesAndDeviceUsageHaveEveryMember() throws {
        let report = HardwareReport(
            libavcodecVersion: "59.37.100", libavcodecVAAPI: true, vaapiHeaderVersion: "1.17.0",
            renderNodes: [RenderNodeReport(path: "/dev/dri/renderD128", error: "not a character device")],
            cuda: CUDAReport(driverVersion: nil, error: nil, devices: [], libavcodecNVDEC: true))
        let json = try #require(try object(HardwareReportJSON(report)) as? [String: Any])
        #expect(Set(json.keys) == ["libavcodecVersion", "libavcodecVAAPI", "vaapiHeaderVersion", "renderNodes", "cuda"])
        let node = try #require((json["renderNodes"] as? [[String: Any]])?.first)
        #expect(Set(node.keys) == ["path", "vendor", "vaapiVersion", "h264Profiles", "hevcProfiles", "codecs", "usable", "error"])
        #expect((node["codecs"] as? [Any])?.isEmpty == true, "an unusable node decodes nothing")
        #expect(node["vendor"] is NSNull && node["usable"] as? Bool == false)

        let usage = try #require(try object(WireFormatTests.deviceUsage.map(HardwareDeviceUsageJSON.init)) as? [[String: Any]])
        for device in usage {
            #expect(Set(device.keys) == ["device", "kind", "name", "state", "sessions", "error", "retryInSeconds"])
        }
        #expect(usage[0]["state"] as? String == "open" && usage[0]["error"] is NSNull)
        #expect(usage[2]["state"] as? String == "not_opened" && usage[2]["kind"] as? String == "cuda")
    }

    /// `frametap probe --hardware` prints these same objects.
    @Test func hardwareAndDevicesAsTheCLIPrintsThem() {
        #expect(String(decoding: WireJSON.bytes(HardwareReportJSON(WireFormatTests.hardware)), as: UTF8.self) == WireFormatTests.hardwareJSON)
        #expect(
            String(decoding: WireJSON.bytes(WireFormatTests.deviceUsage.map(HardwareDeviceUsageJSON.init)), as: UTF8.self)
                == WireFormatTests.deviceUsageJSON)
    }
}

/// `PUT /sessions/{id}` bodies: what each asks for, and the problem for each that is refused
/// (messages as the API has always given them).
@Suite(.timeLimit(.minutes(10))) struct SessionOptionsWireTests {
    @Test func bodiesGiveTheirOptions() throws {
        #expect(try SessionOptionsJSON.parse(Array(#"{"decode":"keyframes","quality":40}"#.utf8)) == SessionOptions(decode: .keyframes, quality: 40))
        #expect(try SessionOptionsJSON.parse(Array(#"{"backend":"vaapi"}"#.utf8)) == SessionOptions(backend: .vaapi))
        #expect(try SessionOptionsJSON.parse([UInt8]()) == SessionOptions())
        #expect(try SessionOptionsJSON.parse(Array(" \r\n\t".utf8)) == SessionOptions())
        #expect(try SessionOptionsJSON.parse(Array(#"{"owner":"frametap-sync"}"#.utf8)) == SessionOptions(owner: try SessionOwner("frametap-sync")))
        #expect(try SessionOptionsJSON.parse(Array(#"{"owner":null}"#.utf8)) == SessionOptions(owner: .some(nil)))
    }

    /// What `frametap sync` writes is what the server reads: every member given, and only those.
    @Test func writtenBodiesReadBack() throws {
        let pull = PullSourceSpec(url: try SourceURL("rtsp://user:p%40ss@10.0.0.7/stream1"), transport: .udp)
        let all = SessionOptions(
            backend: .software, codec: .h265, decode: .onDemand, quality: 55, source: pull, owner: try SessionOwner("sync-a"))
        for options in [all, SessionOptions(), SessionOptions(source: .some(nil), owner: .some(nil)), SessionOptions(quality: 9)] {
            let body = WireJSON.bytes(SessionOptionsJSON(options))
            #expect(try SessionOptionsJSON.parse(body) == options, "\(String(decoding: body, as: UTF8.self))")
        }
        #expect(
            String(decoding: WireJSON.bytes(SessionOptionsJSON(all)), as: UTF8.self)
                == #"{"backend":"software","codec":"h265","decode":"on-demand","owner":"sync-a","quality":55,"#
                + #""source":{"transport":"udp","url":"rtsp://user:p%40ss@10.0.0.7:554/stream1"}}"#)
    }

    @Test func refusedBodiesSayWhy() {
        let refused = [
            #"{"bogus":1}"#: "unknown session option 'bogus'",
            #"{"quality":0}"#: "quality must be 1...100",
            #"{"quality":true}"#: "session option 'quality' must be a whole number, without quotes",
            #"{"quality":"50"}"#: "session option 'quality' must be a whole number, without quotes",
            #"{"decode":7}"#: "session option 'decode' must be a string",
            #"{"quality":null}"#: "session option 'quality' must not be null (leave it out to keep it as it is)",
            #"{"source":"rtsp://cam/1"}"#: #"session option 'source' must be an object (such as {"url": "rtsp://..."})"#,
            #"{"decode":"some"}"#: "decode must be all, keyframes, on-demand",
            #"{"backend":"gpu"}"#: "backend must be auto, cuda, vaapi, software",
            #"{"owner":"a b"}"#: "owner must be 1...64 characters from A-Z a-z 0-9 . _ ~ -",
            #"{"owner":""}"#: "owner must be 1...64 characters from A-Z a-z 0-9 . _ ~ -",
            "[1]": "session options must be a JSON object",
            "{": "session options are not valid JSON",
        ]
        for (body, detail) in refused {
            #expect(throws: HTTPError(status: .badRequest, code: "invalid_parameter", detail: detail), "\(body)") {
                _ = try SessionOptionsJSON.parse(Array(body.utf8))
            }
        }
    }
}
