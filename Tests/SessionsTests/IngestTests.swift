import Foundation
import Testing

@testable import Sessions

@Suite struct IngestTests {
    @Test func sessionIDValidation() throws {
        for good in ["cam1", "A-b_c.d~e", String(repeating: "x", count: 128)] {
            #expect(try SessionID(good).rawValue == good)
        }
        for bad in ["", "a/b", "a b", "é", "a%20", String(repeating: "x", count: 129)] {
            #expect {
                _ = try SessionID(bad)
            } throws: { error in
                (error as? SessionError)?.code == .invalidSessionID
            }
        }
    }

    @Test func startCodeSplitAcrossUploadsDecodesEveryFrame() async throws {
        let stream = try Fixture.bytes(Fixture.baseline)
        // Cut inside the start code of the third NAL unit: "00 00" ends the first upload,
        // "00 01 ..." begins the second.
        var starts: [Int] = []
        for index in 0..<(stream.count - 3) where stream[index] == 0 && stream[index + 1] == 0 && stream[index + 2] == 1 {
            starts.append(index)
        }
        let cut = starts[3] + 2
        #expect(stream[cut - 2] == 0 && stream[cut - 1] == 0 && stream[cut] == 1)
        let session = try makeSession()
        let first = try await push(Array(stream[..<cut]), to: session, flush: false, chunk: 1000)
        let second = try await push(Array(stream[cut...]), to: session, flush: true, chunk: 777)
        #expect(first.bytes + second.bytes == stream.count)
        #expect(first.frames + second.frames == Fixture.baselineFrames)
        #expect(second.latestSeq == UInt64(Fixture.baselineFrames))
        #expect(first.nalUnits["sps"] == 1 && first.nalUnits["pps"] == 1)
        let status = session.status()
        #expect(status.counters.framesDecoded == Fixture.baselineFrames)
        #expect(status.counters.decodeErrors == 0)
        #expect(status.counters.bytes == stream.count)
        #expect(status.latestFrame?.width == 176 && status.latestFrame?.height == 144)
    }

    @Test func flushOutputsEverythingThenAFreshStreamWorks() async throws {
        let stream = try Fixture.bytes(Fixture.baseline)
        let session = try makeSession()
        let first = try await push(stream, to: session, flush: true)
        #expect(first.frames == Fixture.baselineFrames)
        #expect(first.flushed)
        let second = try await push(stream, to: session, flush: true)
        #expect(second.frames == Fixture.baselineFrames)
        // Sequences keep counting across streams, so ETags never repeat.
        #expect(second.latestSeq == UInt64(2 * Fixture.baselineFrames))
        #expect(session.status().counters.framesDecoded == 2 * Fixture.baselineFrames)
    }

    @Test func secondConcurrentUploadIsRefusedWith409() throws {
        let session = try makeSession()
        let upload = try session.beginUpload()
        #expect {
            _ = try session.beginUpload()
        } throws: { error in
            (error as? SessionError)?.code == .sessionBusy
        }
        upload.abort()
        // Sequential uploads are never refused.
        _ = try session.beginUpload()
    }

    @Test func uploadQueueNeverExceedsItsBound() async throws {
        let bound = 64 << 10
        let session = try makeSession(configuration: testConfiguration(uploadQueueBytes: bound))
        let stream = Array(try [[UInt8]](repeating: Fixture.bytes(Fixture.baseline), count: 40).joined())
        let upload = try session.beginUpload()
        let highest = HighWater()
        let pauses = try await send(stream, to: upload, chunk: 16 << 10) { highest.note(session.queuedUploadBytes) }
        let summary = try await finish(upload, flush: true).get()
        #expect(highest.value <= bound)
        #expect(pauses > 0, "a 400 KB upload into a 64 KB queue must have been paused")
        #expect(summary.frames == 40 * Fixture.baselineFrames)
        #expect(summary.bytes == stream.count)
    }

    @Test func abortKeepsTheLastGoodPicture() async throws {
        let stream = try Fixture.bytes(Fixture.baseline)
        let session = try makeSession()
        _ = try await push(stream, to: session, flush: true)
        let before = session.latestSequence
        let upload = try session.beginUpload()
        try await send(Array(stream[..<(stream.count / 3)]), to: upload)
        upload.abort()
        #expect(await eventually { session.status().lastError?.code == "upload_aborted" })
        let status = session.status()
        #expect(status.counters.uploadsAborted == 1)
        #expect(status.latestFrame != nil)
        #expect((session.latestSequence ?? 0) >= (before ?? 1))
        let answer = try await picture(session).get()
        #expect(answer.served != nil)
        // The camera reconnects: a new upload is accepted at once.
        _ = try session.beginUpload()
    }

    @Test func garbageIsCountedAndThePictureSurvives() async throws {
        let session = try makeSession()
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        let good = try await picture(session).get().served
        var generator = SystemRandomNumberGenerator()
        var garbage: [UInt8] = []
        for _ in 0..<50 {
            // Start codes followed by NAL headers with the forbidden bit set and random payloads.
            garbage += [0, 0, 0, 1, 0xE5] + (0..<600).map { _ in UInt8.random(in: 1...255, using: &generator) }
        }
        let result = await finish(
            try {
                let upload = try session.beginUpload()
                _ = try upload.append(garbage)
                return upload
            }(), flush: true)
        if case .failure(let error) = result {
            #expect([.decoding(.invalidData), .decoding(.nalTooLarge)].contains(error.code))
        }
        let status = session.status()
        #expect(status.counters.decodeErrors > 0 || status.lastError != nil)
        let after = try await picture(session).get().served
        #expect(after != nil)
        #expect(after?.sequence == good?.sequence)
    }

    @Test func bodyLimitFailsTheRequestButKeepsTheSession() async throws {
        let stream = try Fixture.bytes(Fixture.baseline)
        let session = try makeSession(configuration: testConfiguration(maxBodyBytes: 4000))
        let upload = try session.beginUpload()
        #expect(throws: SessionError.self) { _ = try upload.append(stream) }
        let result = await finish(upload, flush: true)
        guard case .failure(let error) = result else {
            Issue.record("expected body_too_large")
            return
        }
        #expect(error.code == .bodyTooLarge)
        #expect(session.status().lastError?.code == "body_too_large")
    }

    @Test func keyframesOnlyModeDecodesOnlyKeyframes() async throws {
        let session = try makeSession(options: SessionOptions(decode: .keyframes))
        let summary = try await push(try Fixture.bytes(Fixture.repeatHeaders), to: session, flush: true)
        #expect(summary.frames == 3)
        #expect(session.status().decode == .keyframes)
        #expect(session.status().latestFrame?.keyframe == true)
    }

    @Test func ingestPullsFromABodySource() async throws {
        let stream = try Fixture.bytes(Fixture.baseline)
        let session = try makeSession()
        let source = TestBodySource()
        let result = try await withCheckedThrowingContinuation { continuation in
            do {
                try session.ingest(from: source, flush: true) { continuation.resume(returning: $0) }
            } catch {
                continuation.resume(throwing: error)
                return
            }
            for start in stride(from: 0, to: stream.count, by: 1500) {
                source.feed(.bytes(Array(stream[start..<min(start + 1500, stream.count)])))
            }
            source.feed(.end)
        }
        let summary = try result.get()
        #expect(summary.frames == Fixture.baselineFrames)
        #expect(summary.bytes == stream.count)

        let gone = TestBodySource()
        let aborted = await withCheckedContinuation { continuation in
            _ = try? session.ingest(from: gone, flush: false) { continuation.resume(returning: $0) }
            // Cut inside the first picture (its IDR slice is 2645 bytes): nothing complete arrived.
            gone.feed(.bytes(Array(stream.prefix(2000))))
            gone.feed(.clientGone)
        }
        guard case .failure(let error) = aborted else {
            Issue.record("expected upload_aborted")
            return
        }
        #expect(error.code == .uploadAborted)
        #expect(await eventually { session.status().counters.uploadsAborted == 1 })
        #expect(session.latestSequence == UInt64(Fixture.baselineFrames))
    }

    @Test func multipartAnswerPullsOnePartPerPicture() async throws {
        let stream = try Fixture.bytes(Fixture.baseline)
        let session = try makeSession()
        let spooled = try session.beginSpooledUpload(PictureRequest(format: .jpeg, width: 88))
        for start in stride(from: 0, to: stream.count, by: 3000) {
            try spooled.append(Array(stream[start..<min(start + 3000, stream.count)]))
        }
        // Nothing is decoded before the answer pulls.
        #expect(session.status().counters.bytes == 0)
        spooled.endUpload(flush: true)
        var sequences: [UInt64] = []
        var summary: UploadSummary?
        while summary == nil {
            switch spooled.poll() {
            case .part(let served):
                #expect(served.picture.width == 88 && served.picture.height == 72)
                sequences.append(served.sequence)
                if sequences.count == 1 {
                    // Pull model: nothing more is decoded until this part was taken.
                    try await Task.sleep(for: .milliseconds(50))
                    #expect(session.status().counters.bytes < stream.count)
                }
            case .wait:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    spooled.notifyWhenReady { continuation.resume() }
                }
            case .finished(let result):
                summary = try result.get()
            }
        }
        spooled.cancel()
        #expect(sequences == (1...UInt64(Fixture.baselineFrames)).map { $0 })
        #expect(summary?.frames == Fixture.baselineFrames)
        #expect(summary?.bytes == stream.count)
        // The upload slot is free again.
        _ = try session.beginUpload()
    }
}

/// A bounded pull source like the HTTP layer's request-body queue.
final class TestBodySource: UploadBodySource, @unchecked Sendable {
    private let lock = NSLock()
    private var events: [UploadBodyEvent] = []
    private var handler: (@Sendable () -> Void)?
    private(set) var discarded = false

    func feed(_ event: UploadBodyEvent) {
        lock.lock()
        events.append(event)
        let handler = self.handler
        lock.unlock()
        handler?()
    }

    func nextUploadEvent() -> UploadBodyEvent? {
        lock.lock()
        defer { lock.unlock() }
        return events.isEmpty ? nil : events.removeFirst()
    }

    func setUploadReadyHandler(_ handler: @escaping @Sendable () -> Void) {
        lock.lock()
        self.handler = handler
        let ready = !events.isEmpty
        lock.unlock()
        if ready { handler() }
    }

    func discardRemainingUpload() {
        lock.lock()
        discarded = true
        events.removeAll()
        lock.unlock()
    }
}

final class HighWater: @unchecked Sendable {
    private(set) var value = 0
    func note(_ sample: Int) { value = max(value, sample) }
}
