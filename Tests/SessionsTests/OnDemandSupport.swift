import Decoding
import Dispatch
import Foundation
import SessionsTestSupport
import Synchronization
import Testing
import TestSupport
import Timekeeping
import VideoCoding

@testable import Sessions

/// Streams made with the ffmpeg CLI for the on-demand and history tests (not committed: they are
/// cheap to make, and the 50 Mbit/s one is large).
enum Streams {
    static var ffmpegAvailable: Bool { FileManager.default.isExecutableFile(atPath: ffmpeg) }
    static let ffmpeg = ["/usr/bin/ffmpeg", "/usr/local/bin/ffmpeg"]
        .first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/bin/ffmpeg"
    /// Shared by runs: a stream is named by everything that makes it, so a kept one is the same.
    static let directory = FileManager.default.temporaryDirectory.appendingPathComponent("frametap-ondemand-tests")

    /// `frames` pictures of testsrc2 at `size`, encoded with `encoder` (`libx264`, `libx265`) and
    /// its parameters, as a raw elementary stream; once per process and name.
    static func make(
        _ name: String, encoder: String, size: String = "176x144", frames: Int, parameters: String,
        extra: [String] = []
    ) throws -> [UInt8] {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let recipe = ([encoder, size, String(frames), parameters] + extra).joined(separator: " ")
        let url = directory.appendingPathComponent("\(name).\(MD5.hex(Array(recipe.utf8)).prefix(12))")
        if !FileManager.default.fileExists(atPath: url.path) {
            let partial = directory.appendingPathComponent("\(name).\(UUID().uuidString)")
            let parametersFlag = encoder == "libx265" ? "-x265-params" : "-x264-params"
            let format = encoder == "libx265" ? "hevc" : "h264"
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ffmpeg)
            process.arguments =
                [
                    "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=\(size):rate=30",
                    "-frames:v", "\(frames)", "-c:v", encoder, "-preset", "ultrafast", "-pix_fmt", "yuv420p",
                    parametersFlag, parameters,
                ] + extra + ["-f", format, partial.path]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            try process.waitForExit("ffmpeg to make \(name)")
            guard process.terminationStatus == 0 else { throw TestFailure("ffmpeg could not make \(name)") }
            // Tests running at once may make the same stream: the first one in stays.
            if (try? FileManager.default.moveItem(at: partial, to: url)) == nil {
                try? FileManager.default.removeItem(at: partial)
                guard FileManager.default.fileExists(atPath: url.path) else { throw TestFailure("cannot keep \(name)") }
            }
        }
        return Array(try Data(contentsOf: url))
    }

    /// H.264 with B-frames (B-pyramid) and an IDR every 8 pictures.
    static func h264BFrames() throws -> [UInt8] {
        try make("bframes.264", encoder: "libx264", frames: 40, parameters: "keyint=8:min-keyint=8:scenecut=0:bframes=3:b-pyramid=normal")
    }

    /// H.264 open GOPs: a recovery-point I picture every 8, whose leading B pictures refer to
    /// the GOP before.
    static func h264OpenGOP() throws -> [UInt8] {
        try make("opengop.264", encoder: "libx264", frames: 40, parameters: "keyint=8:min-keyint=8:scenecut=0:bframes=2:open-gop=1")
    }

    /// H.264 intra refresh: one IDR, then a recovery point every 12 pictures, from which the
    /// pictures become exact only some pictures later (libavcodec hides the ones before).
    static func h264IntraRefresh() throws -> [UInt8] {
        try make("intrarefresh.264", encoder: "libx264", frames: 50, parameters: "keyint=12:intra-refresh=1:bframes=0")
    }

    /// Intra refresh with B-frames: the recovery takes more reference pictures than a GOP has
    /// pictures (x264: the macroblock columns + the B-frames - 1), so a picture from the past is
    /// decoded from more than one GOP back.
    static func h264IntraRefreshBFrames() throws -> [UInt8] {
        try make("intrarefresh-b.264", encoder: "libx264", frames: 60, parameters: "keyint=10:intra-refresh=1:bframes=3")
    }

    /// The same stream joined at its second recovery point (a camera joined mid-stream): no IDR
    /// at all, and the first pictures are not shown.
    static func h264IntraRefreshJoined() throws -> [UInt8] {
        let stream = try h264IntraRefresh()
        let units = AnnexBSplitter.split(stream)
        let sequenceSets = units.filter { $0.bytes[0] & 0x1F == 7 }
        guard sequenceSets.count >= 2 else { throw TestFailure("the intra-refresh stream repeats no SPS") }
        return [0, 0, 1] + stream[sequenceSets[1].streamOffset...]
    }

    /// H.265 without IRAP pictures after its first: an intra picture every 12 that is not an
    /// IRAP, each picture referring only to the one before; joined at its second, with a
    /// recovery point SEI (recovery_poc_cnt 3) in front of each.
    static func h265RecoveryPoints(pocCount: Int = 3) throws -> [UInt8] {
        let whole = try make(
            "intra-not-irap.265", encoder: "libx265", frames: 48,
            parameters: "keyint=1000:min-keyint=1000:scenecut=0:bframes=0:ref=1:open-gop=0:log-level=error:pools=1:frame-threads=1",
            extra: ["-force_key_frames", "expr:eq(mod(n,12),0)"])
        return HEVCEdits.joinedAtRecoveryPoints(whole, firstPicture: 12, every: 12, pocCount: pocCount)
    }

    /// H.265 with B-frames and an IDR every 8 pictures.
    static func h265BFrames() throws -> [UInt8] {
        try make(
            "bframes.265", encoder: "libx265", frames: 40,
            parameters: "keyint=8:min-keyint=8:scenecut=0:bframes=3:log-level=error:pools=1:frame-threads=1")
    }
}

/// Session helpers for on-demand and history tests.
enum OnDemand {
    static func configuration(
        linger: Duration = .seconds(10), historySeconds: Duration = .seconds(3600), historyBytes: Int = 64 << 20,
        slots: Int = 2, queue: Int = 16, catchUpThreads: Int = 2
    ) -> ServerConfiguration {
        var configuration = testConfiguration()
        configuration.defaultDecode = .onDemand
        configuration.onDemandLinger = linger
        configuration.historySeconds = historySeconds
        configuration.historyBytes = historyBytes
        configuration.catchUpDecoders = slots
        configuration.catchUpQueue = queue
        configuration.decoderMemoryLimit = DecoderMemoryBudgetFixture.generousLimit
        configuration.catchUpDecoderThreads = catchUpThreads
        return configuration
    }

    /// Services for sessions of `configuration` that share one catch-up pool and memory budget.
    static func services(_ configuration: ServerConfiguration, clock: any ServiceClock = SystemClock()) -> SessionServices {
        SessionServices.forTests(configuration, clock: clock)
    }

    /// Every picture a decode=all session gives for `stream` (pushed whole, flushed), by number,
    /// as raw planes: the reference a decode on demand or from the past must equal.
    static func livePictures(_ stream: [UInt8]) async throws -> [UInt64: [UInt8]] {
        let session = try makeSession("reference", options: SessionOptions(decode: .all))
        defer { session.close() }
        let spooled = try session.beginSpooledUpload(PictureRequest(format: .yuv), flush: true)
        try await send(stream, to: spooled.queue, chunk: 1500)
        spooled.queue.finish()
        var pictures: [UInt64: [UInt8]] = [:]
        try await readToEnd(spooled) { pictures[$0.sequence] = Array($0.picture.bytes) }
        spooled.cancel()
        return pictures
    }

    /// The answer to `frame/at.*` for `target`.
    static func pastPicture(
        _ session: Session, _ target: PastPictureTarget, _ request: PictureRequest = PictureRequest(format: .yuv)
    ) async throws -> Result<PictureAnswer, SessionError> {
        let answer = Outcome<Result<PictureAnswer, SessionError>>()
        session.requestPastPicture(request, at: target) { answer.set($0) }
        return try await answer.value(waitingFor: "the answer to frame/at \(target)")
    }

    /// Waits until everything queued on the session's decode queue so far has run (no sleep:
    /// a barrier), twice, so work the first turn queued has run too.
    static func settle(_ session: Session, turns: Int = 2) throws {
        for turn in 1...turns {
            let reached = DispatchSemaphore(value: 0)
            session.loop.decodeQueue.async { reached.signal() }
            try reached.wait(for: "the decode queue to run what was queued before (turn \(turn) of \(turns))")
        }
    }

    /// Whether asking for `target` fails with `not_in_history`.
    static func isNotInHistory(_ session: Session, _ target: PastPictureTarget) async throws -> Bool {
        guard case .failure(let error) = try await pastPicture(session, target) else { return false }
        return error.code == .notInHistory
    }
}

enum DecoderMemoryBudgetFixture {
    /// A budget no test stream comes near, but its own per test, so its counts are the test's.
    static func generous() -> DecoderMemoryBudget { DecoderMemoryBudget(limit: generousLimit) }
    static let generousLimit = 1 << 34
}
