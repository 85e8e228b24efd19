import Dispatch
import Foundation
import Ingest
import Testing
import VideoCoding
import TestSupport

@testable import Sessions

@Suite(.timeLimit(.minutes(10))) struct IngestTests {
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
        let cut = annexBUnitStarts(stream)[3] - 1
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

    @Test func secondConcurrentUploadIsRefusedWith409() async throws {
        let session = try makeSession()
        let queue = try session.beginUpload(flush: false) { _ in }
        #expect {
            _ = try session.beginUpload(flush: false) { _ in }
        } throws: { error in
            (error as? SessionError)?.code == .sessionBusy
        }
        #expect(session.status().uploading)
        // Once the body ended, the next upload is accepted at once; it waits for the first
        // to be decoded before it takes bytes.
        queue.finish()
        let next = Outcome<Result<UploadSummary, SessionError>>()
        let second = try session.beginUpload(flush: true) { next.set($0) }
        try await send(try Fixture.bytes(Fixture.baseline), to: second)
        second.finish()
        #expect(try await next.value(waitingFor: "the second upload's answer").get().frames == Fixture.baselineFrames)
    }

    @Test func uploadQueueNeverExceedsItsBound() async throws {
        let bound = 64 << 10
        let session = try makeSession(configuration: testConfiguration(uploadQueueBytes: bound))
        let stream = Array(try [[UInt8]](repeating: Fixture.bytes(Fixture.baseline), count: 40).joined())
        let answer = Outcome<Result<UploadSummary, SessionError>>()
        let queue = try session.beginUpload(flush: true) { answer.set($0) }
        let pauses = try await send(stream, to: queue, chunk: 16 << 10)
        queue.finish()
        let summary = try await answer.value(waitingFor: "the upload's answer").get()
        #expect(queue.highestQueuedBytes <= bound)
        #expect(pauses > 0, "a 400 KB upload into a 64 KB queue must have been paused")
        #expect(summary.frames == 40 * Fixture.baselineFrames)
        #expect(summary.bytes == stream.count)
    }

    @Test func aClientThatLeavesKeepsTheLastGoodPicture() async throws {
        let stream = try Fixture.bytes(Fixture.baseline)
        let session = try makeSession()
        _ = try await push(stream, to: session, flush: true)
        let before = try #require(session.latestSequence)
        let answer = Outcome<Result<UploadSummary, SessionError>>()
        let queue = try session.beginUpload(flush: false) { answer.set($0) }
        try await send(Array(stream[..<(stream.count / 3)]), to: queue)
        queue.abort(.clientGone)
        guard case .failure(let error) = try await answer.value(waitingFor: "the aborted upload's answer") else {
            Issue.record("expected upload_aborted")
            return
        }
        #expect(error.code == .uploadAborted)
        let status = session.status()
        #expect(status.lastError?.code == "upload_aborted")
        #expect(status.counters.uploadsAborted == 1)
        #expect((session.latestSequence ?? 0) >= before)
        #expect(try await picture(session).get().served != nil)
        // The camera reconnects: a new upload is accepted at once, and the unit the broken one
        // was cut inside is not this one's damage.
        let again = try await upload(stream, to: session, flush: true)
        let summary = try again.get()
        #expect(summary.decodeErrors == 0, "\(String(describing: summary.error))")
        #expect(summary.frames == Fixture.baselineFrames)
    }

    /// A push that breaks off drops the access unit under way, even one an earlier push began
    /// and whose end was not seen yet: `counters.accessUnits` then says where to resume, and
    /// resuming there repeats nothing.
    @Test func aPushThatBreaksOffEmptyLeavesAnExactPlaceToResume() async throws {
        let stream = try Fixture.bytes(Fixture.baseline)
        let session = try makeSession()
        _ = try await push(stream, to: session, flush: false)
        let answer = Outcome<Result<UploadSummary, SessionError>>()
        let queue = try session.beginUpload(flush: false) { answer.set($0) }
        queue.abort(.clientGone)
        _ = try await answer.value(waitingFor: "the empty aborted upload's answer")
        #expect(await eventually { !session.status().uploading })
        let kept = session.status().counters.accessUnits
        #expect(kept == Fixture.baselineFrames - 1, "the last picture's end was never seen")
        // Resume with the access unit after those kept: the stream's last one.
        let units = AnnexBSplitter.split(stream)
        let isSlice: (AnnexBUnit) -> Bool = { unit in
            let type = (unit.bytes.first ?? 0) & 0x1F
            return type == 1 || type == 5
        }
        let lastStart = try #require(units.lastIndex(where: isSlice))
        var resumed: [UInt8] = []
        for unit in units[lastStart...] { resumed += [0, 0, 0, 1] + Array(unit.bytes) }
        _ = try await push(resumed, to: session, flush: true)
        #expect(session.status().counters.framesDecoded == Fixture.baselineFrames)
        #expect(session.latestSequence == UInt64(Fixture.baselineFrames))
    }

    /// A delimiter after each picture (as README advises) makes a last access unit with no
    /// picture at a flush: not counted, so `counters.accessUnits` stays the pictures sent.
    @Test func aDelimiterAfterTheLastPictureIsNoAccessUnitOfItsOwn() async throws {
        var delimited: [UInt8] = []
        for unit in AnnexBSplitter.split(try Fixture.bytes(Fixture.baseline)) {
            delimited += [0, 0, 0, 1] + Array(unit.bytes)
            if [1, 5].contains((unit.bytes.first ?? 0) & 0x1F) { delimited += [0, 0, 0, 1, 0x09, 0xF0] }
        }
        let session = try makeSession()
        for round in 1...2 {
            let summary = try await push(delimited, to: session, flush: true)
            #expect(summary.frames == Fixture.baselineFrames)
            #expect(session.status().counters.accessUnits == round * Fixture.baselineFrames)
            #expect(session.latestSequence == UInt64(round * Fixture.baselineFrames))
        }
    }

    /// Units that arrived before any parameter set (the codec unknown yet) are held, uncounted;
    /// a push that breaks off drops them, so the client's resume at `counters.accessUnits` (0)
    /// numbers its pictures as if nothing broke.
    @Test func aBrokenPushBeforeTheParameterSetsLeavesNothingToReplay() async throws {
        let stream = try Fixture.bytes(Fixture.baseline)
        var withoutParameterSets: [UInt8] = []
        for unit in AnnexBSplitter.split(stream) where ![7, 8].contains((unit.bytes.first ?? 0) & 0x1F) {
            withoutParameterSets += [0, 0, 0, 1] + Array(unit.bytes)
        }
        let session = try makeSession()
        let answer = Outcome<Result<UploadSummary, SessionError>>()
        let queue = try session.beginUpload(flush: false) { answer.set($0) }
        try await send(Array(withoutParameterSets.prefix(withoutParameterSets.count / 2)), to: queue)
        queue.abort(.clientGone)
        _ = try await answer.value(waitingFor: "the broken push's answer")
        #expect(await eventually { !session.status().uploading })
        #expect(session.status().counters.accessUnits == 0)
        _ = try await push(stream, to: session, flush: true)
        let status = session.status()
        #expect(status.counters.framesDecoded == Fixture.baselineFrames)
        #expect(status.counters.accessUnits == Fixture.baselineFrames)
        #expect(session.latestSequence == UInt64(Fixture.baselineFrames))
    }

    /// A push whose connection vanished mid-picture holds the session; a push with `takeover`
    /// ends it at once (its client is answered `push_taken_over`), after decoding what of it
    /// arrived and dropping the unit it was cut inside. An empty takeover push's answer comes
    /// once that is done, so `counters.accessUnits` then says exactly where to resume.
    @Test(arguments: [false, true])
    func aTakeoverEndsAVanishedPushAndLeavesAnExactPlaceToResume(flushing: Bool) async throws {
        let stream = try Fixture.bytes(Fixture.baseline)
        let units = AnnexBSplitter.split(stream)
        let sliceOffsets = annexBUnitStarts(stream).enumerated().compactMap { index, offset -> Int? in
            let type = (units[index].bytes.first ?? 0) & 0x1F
            return type == 1 || type == 5 ? offset : nil
        }
        #expect(sliceOffsets.count == Fixture.baselineFrames)
        // The hold a takeover leaves lasts 10 s on this clock, however slowly a loaded machine runs.
        let session = try makeSession(clock: ManualClock())
        let vanished = Outcome<Result<UploadSummary, SessionError>>()
        // A push that was to end the stream: taken over, its flush does not apply.
        let queue = try session.beginUpload(flush: flushing) { vanished.set($0) }
        #expect(sliceOffsets[6] - sliceOffsets[5] > 80)
        // Up to the middle of the sixth picture, and then nothing more.
        try await send(Array(stream[..<(sliceOffsets[5] + 40)]), to: queue)
        #expect {
            _ = try session.beginUpload(flush: false) { _ in }
        } throws: { error in
            (error as? SessionError)?.code == .sessionBusy
                && (error as? SessionError)?.message.contains("takeover=true") == true
        }
        let takeover = Outcome<Result<UploadSummary, SessionError>>()
        let empty = try session.beginUpload(flush: false, takeover: true) { takeover.set($0) }
        empty.finish()
        guard case .failure(let error) = try await vanished.value(waitingFor: "the taken-over push's answer") else {
            Issue.record("the taken-over push must fail")
            return
        }
        #expect(error.code == .pushTakenOver)
        let late = [UInt8](repeating: 0, count: 8).withUnsafeBytes { queue.offer($0) }
        #expect(late == .refused(error), "the taken-over push's client learns it at its next bytes")
        #expect(try await takeover.value(waitingFor: "the takeover push's answer").get().frames == 0)
        let kept = session.status().counters.accessUnits
        #expect(kept == 5, "five whole pictures arrived; the sixth was cut")
        #expect(session.status().uploading == false)
        #expect(session.status().counters.uploadsTakenOver == 1)
        #expect(session.status().counters.uploadsAborted == 0, "taken over, not aborted by its client")
        #expect(session.status().hold == .takeover, "a takeover naming no publisher holds against named ones")
        // From the start code of the picture after those kept.
        _ = try await push(Array(stream[(sliceOffsets[kept] - 3)...]), to: session, flush: true)
        let status = session.status()
        #expect(status.counters.framesDecoded == Fixture.baselineFrames)
        #expect(status.counters.decodeErrors == 0, "\(String(describing: status.lastError))")
        #expect(session.latestSequence == UInt64(Fixture.baselineFrames))
        #expect(status.hold == nil, "a flush ends the hold")
    }

    /// A takeover refused for what it carries (another codec) takes nothing over: the push
    /// under way still holds the session, and a third push is told so.
    @Test func aRefusedTakeoverLeavesThePushUnderWayHoldingTheSession() async throws {
        let session = try makeSession()
        let stream = try Fixture.bytes(Fixture.baseline)
        let answer = Outcome<Result<UploadSummary, SessionError>>()
        let queue = try session.beginUpload(flush: false, codec: .h264) { answer.set($0) }
        try await send(Array(stream.prefix(3000)), to: queue)
        #expect(await eventually { session.status().codec == .h264 })
        #expect {
            _ = try session.beginUpload(flush: false, codec: .h265, takeover: true) { _ in }
        } throws: { error in
            (error as? SessionError)?.code == .decoding(.codecMismatch)
        }
        #expect {
            _ = try session.beginUpload(flush: false) { _ in }
        } throws: { error in
            (error as? SessionError)?.code == .sessionBusy
        }
        try await send(Array(stream.dropFirst(3000)), to: queue)
        queue.finish()
        #expect(try await answer.value(waitingFor: "the push under way").get().frames == Fixture.baselineFrames - 1)
        #expect(session.status().counters.uploadsTakenOver == 0)
    }

    /// A push answered as multipart/mixed whose whole body arrived is read by its own client:
    /// a takeover is refused, saying so, rather than queued behind a reader who may never read.
    @Test func aMultipartAnswerBeingReadIsNotTakenOver() async throws {
        let session = try makeSession()
        let spooled = try session.beginSpooledUpload(PictureRequest(format: .yuv), flush: true)
        try await send(try Fixture.bytes(Fixture.baseline), to: spooled.queue)
        spooled.queue.finish()
        for takeover in [true, false] {
            #expect {
                _ = try session.beginUpload(flush: false, takeover: takeover) { _ in }
            } throws: { error in
                (error as? SessionError)?.code == .sessionBusy && (error as? SessionError)?.message.contains("multipart") == true
            }
        }
        spooled.cancel()
    }

    /// Pushes that name their publisher: another client's push is refused while one of the
    /// publisher's runs and for a while after (pushes one request per picture never overlap),
    /// the publisher's own push takes over its vanished one, `takeover` overrides the hold, and a
    /// flush ends it.
    @Test func aNamedPublisherHoldsTheStreamAgainstOtherClients() async throws {
        let stream = try Fixture.bytes(Fixture.baseline)
        let clock = ManualClock()
        let session = try makeSession(clock: clock)
        func refusal(_ publisher: String?) -> SessionError? {
            do {
                _ = try session.beginUpload(flush: false, publisher: publisher) { _ in }
                return nil
            } catch {
                return error
            }
        }
        func whole(_ bytes: [UInt8], by publisher: String?, flush: Bool = false, takeover: Bool = false) async throws
            -> UploadSummary
        {
            let answer = Outcome<Result<UploadSummary, SessionError>>()
            let queue = try session.beginUpload(flush: flush, publisher: publisher, takeover: takeover) { answer.set($0) }
            try await send(bytes, to: queue)
            queue.finish()
            return try await answer.value(waitingFor: "\(publisher ?? "anonymous")'s push").get()
        }

        _ = try await whole(Array(stream.prefix(3000)), by: "phone-a")
        #expect(session.status().hold == .publisher("phone-a"))
        let busy = try #require(refusal("phone-b"))
        #expect(busy.code == .sessionBusy && busy.message.contains("publisher 'phone-a' pushed to it"))
        #expect(busy.facts == ["heldBy": .text("publisher"), "publisher": .text("phone-a")])
        #expect(refusal(nil)?.code == .sessionBusy, "a push naming no publisher is another client too")
        clock.advance(by: .seconds(5))
        _ = try await whole(Array(stream[3000..<6000]), by: "phone-a")

        // Ten seconds after phone-a's last push, phone-b may push; its own push takes over its
        // vanished one.
        clock.advance(by: .seconds(11))
        #expect(session.status().publisher == nil)
        let vanished = Outcome<Result<UploadSummary, SessionError>>()
        let lost = try session.beginUpload(flush: false, publisher: "phone-b") { vanished.set($0) }
        try await send(Array(stream[6000..<7000]), to: lost)
        #expect(session.status().publisher == "phone-b")
        #expect(refusal("phone-a")?.message.contains("publisher 'phone-b' is pushing to it") == true)
        _ = try await whole([], by: "phone-b")
        guard case .failure(let takenOver) = try await vanished.value(waitingFor: "phone-b's vanished push") else {
            Issue.record("phone-b's own push takes over its vanished one")
            return
        }
        #expect(takenOver.code == .pushTakenOver)
        #expect(session.status().counters.uploadsTakenOver == 1)

        // takeover=true overrides the hold; a flush ends it.
        _ = try await whole(Array(stream[6000...]), by: "phone-a", flush: true, takeover: true)
        #expect(session.status().publisher == nil)
        #expect(session.status().hold == nil)
        _ = try await whole(stream, by: nil, flush: true)
        #expect(session.status().lastError?.code != "push_taken_over", "a takeover is no error of the stream")
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
        let result = try await upload(garbage, to: session, flush: true)
        guard case .failure(let error) = result else {
            Issue.record("a flushed upload with no picture and errors fails")
            return
        }
        #expect([.decoding(.invalidData), .decoding(.nalTooLarge)].contains(error.code))
        let status = session.status()
        #expect(status.counters.decodeErrors > 0)
        let after = try await picture(session).get().served
        #expect(after?.sequence == good?.sequence)
    }

    @Test func bodyLimitFailsTheRequestButKeepsTheSession() async throws {
        let stream = try Fixture.bytes(Fixture.baseline)
        let session = try makeSession(configuration: testConfiguration(maxBodyBytes: 4000))
        let answer = Outcome<Result<UploadSummary, SessionError>>()
        let queue = try session.beginUpload(flush: true) { answer.set($0) }
        let offer = stream.withUnsafeBytes { queue.offer($0) }
        #expect(offer == .refused(SessionError(IngestError(.bodyTooLarge, "request body exceeds 4000 bytes"))))
        guard case .failure(let error) = try await answer.value(waitingFor: "the refused upload's answer") else {
            Issue.record("expected body_too_large")
            return
        }
        #expect(error.code == .ingest(.bodyTooLarge))
        #expect(session.status().lastError?.code == "body_too_large")
        // The slot is free again.
        _ = try session.beginUpload(flush: false) { _ in }
    }

    @Test func keyframesOnlyModeDecodesOnlyKeyframes() async throws {
        let session = try makeSession(options: SessionOptions(decode: .keyframes))
        let summary = try await push(try Fixture.bytes(Fixture.repeatHeaders), to: session, flush: true)
        #expect(summary.frames == 3)
        #expect(session.status().decode == .keyframes)
        #expect(session.status().latestFrame?.keyframe == true)
    }

    @Test func aDeletedSessionRefusesItsUploadAtOnce() async throws {
        let session = try makeSession()
        let answer = Outcome<Result<UploadSummary, SessionError>>()
        let queue = try session.beginUpload(flush: false) { answer.set($0) }
        try await send(Array(try Fixture.bytes(Fixture.baseline).prefix(3000)), to: queue)
        let woken = Flag()
        queue.setProducerWake { woken.set() }
        session.close()
        // The producer is woken (a suspended connection resumes) and its next piece is refused.
        #expect(woken.count >= 1)
        let refused = [UInt8](repeating: 0, count: 10).withUnsafeBytes { queue.offer($0) }
        #expect(refused == .refused(SessionError(.sessionNotFound, "the session was deleted")))
        guard case .failure(let error) = try await answer.value(waitingFor: "the deleted session's upload answer") else {
            Issue.record("expected session_not_found")
            return
        }
        #expect(error.code == .sessionNotFound)
    }

    /// A pusher whose session the configuration file took over learns that, not "deleted".
    @Test func aSessionTakenOverSaysSoToItsPusher() async throws {
        let session = try makeSession()
        let answer = Outcome<Result<UploadSummary, SessionError>>()
        let queue = try session.beginUpload(flush: false) { answer.set($0) }
        try await send(Array(try Fixture.bytes(Fixture.baseline).prefix(3000)), to: queue)
        session.close(reason: "declared")
        guard case .failure(let error) = try await answer.value(waitingFor: "the taken-over session's upload answer") else {
            Issue.record("expected session_not_found")
            return
        }
        #expect(error.code == .sessionNotFound && error.message.contains("configuration file now declares"), "\(error)")
    }

    @Test func shutdownStopsDecodingAtOnce() async throws {
        let session = try makeSession(configuration: testConfiguration(uploadQueueBytes: 1 << 20))
        let answer = Outcome<Result<UploadSummary, SessionError>>()
        let queue = try session.beginUpload(flush: true) { answer.set($0) }
        // The decode queue is held up while the bytes arrive and the server stops listening,
        // so anything decoded afterwards would be decoded after the stop.
        let hold = try QueueHold(session.loop.decodeQueue, "the decode queue")
        let stream = Array(try [[UInt8]](repeating: Fixture.bytes(Fixture.baseline), count: 20).joined())
        #expect(stream.withUnsafeBytes { queue.offer($0) } == .accepted(stream.count))
        queue.abort(.serverShutdown)
        #expect(queue.queuedBytes == 0)
        hold.release()
        guard case .failure(let error) = try await answer.value(waitingFor: "the stopped upload's answer") else {
            Issue.record("expected shutting_down")
            return
        }
        #expect(error.code == .shuttingDown)
        #expect(session.status().counters.bytes == 0, "nothing was decoded after the stop")
        #expect(session.status().counters.framesDecoded == 0)
    }

    @Test func aSecondUploadHoldsNoBytesWhileTheFirstIsDecoded() async throws {
        let session = try makeSession()
        let first = try session.beginUpload(flush: false) { _ in }
        let hold = try QueueHold(session.loop.decodeQueue, "the decode queue")
        let bytes = try Fixture.bytes(Fixture.baseline)
        #expect(bytes.withUnsafeBytes { first.offer($0) } == .accepted(bytes.count))
        first.finish()
        let answer = Outcome<Result<UploadSummary, SessionError>>()
        let second = try session.beginUpload(flush: true) { answer.set($0) }
        let woken = Flag()
        second.setProducerWake { woken.set() }
        #expect(bytes.withUnsafeBytes { second.offer($0) } == .accepted(0), "waits: the first is not decoded")
        hold.release()
        #expect(await eventually { woken.count == 1 }, "admitted once the first was decoded")
        try await send(bytes, to: second)
        second.finish()
        #expect(try await answer.value(waitingFor: "the second upload's answer").get().frames > 0)
    }

    @Test func multipartAnswerPullsOnePartPerPicture() async throws {
        let stream = try Fixture.bytes(Fixture.baseline)
        let session = try makeSession()
        let spooled = try session.beginSpooledUpload(PictureRequest(format: .jpeg, width: 88), flush: true)
        let bodyEnded = Outcome<Result<Void, SessionError>>()
        spooled.onUploadEnd { bodyEnded.set($0) }
        try await send(stream, to: spooled.queue, chunk: 3000)
        spooled.queue.finish()
        try await bodyEnded.value(waitingFor: "the multipart upload's body to end").get()
        // Nothing is decoded before the answer pulls.
        #expect(session.status().counters.bytes == 0)
        var sequences: [UInt64] = []
        let summary = try await readToEnd(spooled) { served in
            #expect(served.picture.width == 88 && served.picture.height == 72)
            sequences.append(served.sequence)
        } afterWait: {
            if sequences.count == 1 {
                // Pull model: decoding stays a picture or so ahead of what was taken.
                #expect(session.status().counters.bytes < stream.count)
            }
        }
        spooled.cancel()
        #expect(sequences == (1...UInt64(Fixture.baselineFrames)).map { $0 })
        #expect(summary.frames == Fixture.baselineFrames)
        #expect(summary.bytes == stream.count)
        // The upload slot is free again.
        _ = try session.beginUpload(flush: false) { _ in }
    }

    /// A reader that polled while the body was still arriving, and asks to be told only after the
    /// body ended, is told at once: the end of the body is progress for it (it starts pulling).
    @Test func aReaderThatPolledBeforeTheBodyEndedIsToldOfItsEnd() async throws {
        let session = try makeSession()
        let spooled = try session.beginSpooledUpload(PictureRequest(format: .yuv), flush: true)
        let bodyEnded = Outcome<Result<Void, SessionError>>()
        spooled.onUploadEnd { bodyEnded.set($0) }
        try await send(try Fixture.bytes(Fixture.baseline), to: spooled.queue)
        guard case .wait = spooled.poll() else {
            Issue.record("nothing to take before the body ended")
            return
        }
        spooled.queue.finish()
        try await bodyEnded.value(waitingFor: "the multipart upload's body to end").get()
        let told = Signal()
        spooled.notifyWhenReady { told.signal() }
        try await told.wait(for: "the reader to be told that the body ended", timeout: .seconds(5))
        let summary = try await readToEnd(spooled)
        #expect(summary.frames == Fixture.baselineFrames)
        spooled.cancel()
    }

    /// A multipart answer cancelled after its body was finished but before the decode loop took
    /// that end (the queue's abort then changes nothing): the push still ends, and the next
    /// upload is admitted and answered.
    @Test func aMultipartAnswerCancelledAsItsBodyEndsFreesTheSession() async throws {
        let session = try makeSession()
        let stream = try Fixture.bytes(Fixture.baseline)
        let spooled = try session.beginSpooledUpload(PictureRequest(format: .yuv), flush: true)
        try await send(stream, to: spooled.queue)
        let hold = try QueueHold(session.loop.decodeQueue, "the decode queue")
        spooled.queue.finish()
        spooled.cancel()
        hold.release()
        let summary = try await push(stream, to: session, flush: true)
        #expect(summary.frames == Fixture.baselineFrames)
    }

    @Test func aFailedMultipartPushEndsWithItsError() async throws {
        let session = try makeSession()
        let spooled = try session.beginSpooledUpload(PictureRequest(), flush: true)
        try await send(Array("not H.264 at all".utf8), to: spooled.queue)
        spooled.queue.finish()
        var ending: Result<UploadSummary, SessionError>?
        while ending == nil {
            switch spooled.poll() {
            case .part: Issue.record("no picture in garbage")
            case .wait:
                let ready = Signal()
                spooled.notifyWhenReady { ready.signal() }
                try await ready.wait(for: "the multipart answer's next part or its end")
            case .finished(let result): ending = result
            }
        }
        guard case .failure(let error) = ending else {
            Issue.record("a push with no picture and errors fails, also as multipart")
            return
        }
        #expect(error.code == .decoding(.invalidData))
        spooled.cancel()
    }

    @Test func spoolLimitRefusesAtOnce() async throws {
        var configuration = testConfiguration()
        configuration.maxSpoolBytes = 10_000
        let session = try makeSession(configuration: configuration)
        let spooled = try session.beginSpooledUpload(PictureRequest(), flush: true)
        let bodyEnded = Outcome<Result<Void, SessionError>>()
        spooled.onUploadEnd { bodyEnded.set($0) }
        let zeros = [UInt8](repeating: 0, count: 4096)
        var refusal: SessionError?
        for _ in 0..<10 where refusal == nil {
            if case .refused(let error) = zeros.withUnsafeBytes({ spooled.queue.offer($0) }) { refusal = error }
        }
        #expect(refusal?.code == .ingest(.bodyTooLarge))
        guard case .failure(let error) = try await bodyEnded.value(waitingFor: "the refused multipart upload's body to end") else {
            Issue.record("the upload failed")
            return
        }
        #expect(error.code == .ingest(.bodyTooLarge))
        #expect(session.status().lastError?.code == "body_too_large")
        spooled.cancel()
        _ = try session.beginUpload(flush: false) { _ in }
    }
}
