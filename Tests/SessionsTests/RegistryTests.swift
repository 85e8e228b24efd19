import Foundation
import Testing
import TestSupport

@testable import Sessions

@Suite(.timeLimit(.minutes(10))) struct RegistryTests {
    private func registry(_ configuration: ServerConfiguration = testConfiguration(), metrics: FrameTapMetrics = FrameTapMetrics())
        -> SessionRegistry
    {
        makeRegistry(configuration, metrics: metrics)
    }

    @Test func createGetListDelete() throws {
        let sessions = registry()
        let (first, created) = try sessions.openSession(SessionID("b"))
        #expect(created)
        let (again, createdAgain) = try sessions.openSession(SessionID("b"))
        #expect(!createdAgain && again === first)
        _ = try sessions.openSession(SessionID("a"))
        #expect(sessions.list().map(\.id.rawValue) == ["a", "b"])
        #expect(try sessions.session(SessionID("a")).id.rawValue == "a")
        try sessions.delete(SessionID("a"))
        #expect(first.isClosed == false)
        #expect(sessions.count == 1)
        #expect {
            try sessions.delete(SessionID("a"))
        } throws: { error in
            (error as? SessionError)?.code == .sessionNotFound
        }
    }

    @Test func sessionLimitAnswers503WithRetryAfter() throws {
        let sessions = registry(testConfiguration(maxSessions: 2, idleTimeout: .seconds(60)))
        _ = try sessions.openSession(SessionID("one"))
        _ = try sessions.openSession(SessionID("two"))
        do {
            _ = try sessions.openSession(SessionID("three"))
            Issue.record("expected too_many_sessions")
        } catch {
            #expect(error.code == .tooManySessions)
            #expect((1...60).contains(error.retryAfterSeconds ?? 0))
        }
        // An existing one is still reachable at the limit.
        _ = try sessions.openSession(SessionID("one"))
    }

    /// When every session is kept, none will expire: no Retry-After, and the detail says so.
    @Test func aLimitOfKeptSessionsPromisesNoRetry() throws {
        let sessions = registry(testConfiguration(maxSessions: 2, idleTimeout: .seconds(60)))
        _ = try sessions.openSession(SessionID("declared"), standing: .declared)
        _ = try sessions.openSession(SessionID("kept"), standing: SessionStanding(origin: .api, persisted: true))
        do {
            _ = try sessions.openSession(SessionID("three"))
            Issue.record("expected too_many_sessions")
        } catch {
            #expect(error.code == .tooManySessions && error.retryAfterSeconds == nil)
            #expect(error.message.contains("none will expire"), "\(error.message)")
        }
    }

    @Test func idleSessionsAreEvictedBusyOnesAreNot() throws {
        let metrics = FrameTapMetrics()
        let clock = ManualClock()
        let sessions = makeRegistry(testConfiguration(idleTimeout: .seconds(100)), metrics: metrics, clock: clock)
        let (idle, _) = try sessions.openSession(SessionID("idle"))
        let (watched, _) = try sessions.openSession(SessionID("watched"))
        let viewer = try watched.subscribe(PictureRequest())
        clock.advance(by: .seconds(99))
        #expect(sessions.evictIdle() == [])
        clock.advance(by: .seconds(1))
        #expect(sessions.evictIdle() == [try SessionID("idle")])
        #expect(idle.isClosed)
        #expect(!watched.isClosed)
        // Leaving counts as activity: the idle timeout starts from the last viewer's exit.
        viewer.cancel()
        clock.advance(by: .seconds(99))
        #expect(sessions.evictIdle() == [])
        clock.advance(by: .seconds(1))
        #expect(sessions.evictIdle() == [try SessionID("watched")])
        #expect(sessions.count == 0)
        #expect(metrics.exposition().contains("frametap_sessions_ended_total{reason=\"idle\"} 2"))
    }

    /// A publisher's hold (10 s after its last push) keeps its session, whatever the idle timeout:
    /// another client's push must find it held, not a new session in its place.
    @Test func aPublishersHoldKeepsItsSessionFromTheIdleTimeout() async throws {
        let clock = ManualClock()
        let sessions = makeRegistry(testConfiguration(idleTimeout: .seconds(3)), clock: clock)
        let (session, _) = try sessions.openSession(SessionID("held"))
        let answer = Outcome<Result<UploadSummary, SessionError>>()
        let queue = try session.beginUpload(flush: false, publisher: "phone") { answer.set($0) }
        queue.finish()
        _ = try await answer.value(waitingFor: "the publisher's push")
        clock.advance(by: .seconds(9))
        #expect(sessions.evictIdle() == [], "held for 10 s after the push")
        clock.advance(by: .seconds(1))
        #expect(sessions.evictIdle() == [try SessionID("held")])
    }

    @Test func evictionRunsEveryQuarterOfTheIdleTimeout() throws {
        let clock = ManualClock()
        let sessions = makeRegistry(testConfiguration(idleTimeout: .seconds(20)), clock: clock)
        _ = try sessions.openSession(SessionID("x"))
        sessions.startIdleEviction()
        clock.advance(by: .seconds(15))
        #expect(sessions.count == 1)
        clock.advance(by: .seconds(5))  // idle for 20 s, and a check falls due
        #expect(sessions.count == 0)
        sessions.shutdown()
        clock.advance(by: .seconds(1))  // the ended session's memory return, one-shot
        #expect(clock.pendingActions <= 1)
    }

    @Test func deleteEndsViewersCleanly() async throws {
        let sessions = registry()
        let (session, _) = try sessions.openSession(SessionID("cam"))
        let viewer = try session.subscribe(PictureRequest())
        _ = viewer.poll()
        let woken = Flag()
        viewer.notifyWhenReady { woken.set() }
        try sessions.delete(SessionID("cam"))
        #expect(woken.count == 1)
        guard case .ended = viewer.poll() else {
            Issue.record("expected .ended")
            return
        }
        viewer.cancel()
    }

    @Test func configureChangesOptions() throws {
        let sessions = registry()
        let (session, _) = try sessions.openSession(SessionID("cfg"))
        try session.configure(SessionOptions(decode: .keyframes, quality: 40))
        let status = session.status()
        #expect(status.decode == .keyframes)
        #expect(status.quality == 40)
        #expect(status.backend == .software)
    }

    /// What `status()` reports before and after a stream (its JSON shape is FrameTapAPI's, pinned
    /// in FrameTapAPITests' WireFormatTests).
    @Test func statusReportsTheStream() async throws {
        let session = try makeSession()
        let empty = session.status()
        #expect(empty.latestFrame == nil && empty.lastError == nil && empty.format == nil)

        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        let status = session.status()
        #expect(status.id.rawValue == "cam1")
        #expect(status.backend == .software)
        #expect(status.createdAt <= status.lastActivityAt && status.lastActivityAt <= Date())
        #expect(status.format?.width == 176 && status.format?.height == 144)
        #expect(status.counters.framesDecoded == Fixture.baselineFrames)
        #expect(status.latestFrame?.seq == UInt64(Fixture.baselineFrames))
        #expect(status.subscribers == 0)
    }

    @Test func metricsExpositionHasTheSeries() async throws {
        let metrics = FrameTapMetrics()
        let sessions = registry(metrics: metrics)
        let (session, _) = try sessions.openSession(SessionID("m"))
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        _ = try await picture(session).get()
        _ = try await picture(session).get()
        let viewer = try session.subscribe(PictureRequest())
        metrics.recordRequest(route: "/sessions/{id}/frame/latest.jpg", status: 200, duration: .milliseconds(3))
        let text = metrics.exposition()
        for series in [
            "frametap_sessions_active 1",
            "frametap_ingest_bytes_total \(try Fixture.bytes(Fixture.baseline).count)",
            "frametap_nal_units_total{type=\"sps\"} 1",
            "frametap_frames_decoded_total \(Fixture.baselineFrames)",
            "frametap_picture_encodes_total{format=\"jpeg\"} 1",
            "frametap_picture_encode_seconds_count{format=\"jpeg\"} 1",
            "frametap_decode_latency_seconds_count",
            "frametap_http_requests_total{route=\"/sessions/{id}/frame/latest.jpg\",status=\"200\"} 1",
            "frametap_mjpeg_clients 1",
        ] {
            #expect(text.contains(series), "missing \(series)")
        }
        viewer.cancel()
        try sessions.delete(SessionID("m"))
        let after = metrics.exposition()
        #expect(after.contains("frametap_sessions_active 0"))
        #expect(after.contains("frametap_mjpeg_clients 0"))
    }
}
