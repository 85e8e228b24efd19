import Containers
import Decoding
import Ingest
import SessionCatalog
import Sessions
import Testing
import TestSupport
import VideoCoding

@Suite(.timeLimit(.minutes(10)))
struct SessionCatalogTests {
    @Test func declaredSessionsAreMadeAndShownAsDeclared() throws {
        let catalog = makeCatalog()
        let outcome = catalog.declare([try declaration("yard", codec: .h265), try declaration("door", quality: 60)])
        #expect(outcome.failed.isEmpty)
        #expect(outcome.changes == ["created": ["yard", "door"]])
        let yard = try catalog.registry.session(SessionID("yard"))
        #expect(yard.status().standing == .declared)
        #expect(yard.status().codec == .h265 && yard.status().codecStated)
        #expect(try catalog.registry.session(SessionID("door")).status().quality == 60)
        #expect(catalog.declaredCount == 2)
    }

    @Test func aDeclaredSessionCannotBeDeletedNorChangedByAClient() throws {
        let catalog = makeCatalog()
        _ = catalog.declare([SessionDeclaration(id: try SessionID("yard"), options: SessionOptions(codec: .h265), place: "f.yaml:4:3")])
        do {
            try catalog.delete(SessionID("yard"))
            Issue.record("a declared session was deleted")
        } catch {
            #expect(error.code == .declaredSession)
            #expect(error.message.contains("f.yaml:4:3") && error.message.contains("edit the file"))
        }
        #expect(catalog.registry.find(try SessionID("yard")) != nil)
        // Its own definition, or part of it, changes nothing and is answered as a PUT would be.
        let (session, created) = try catalog.put(SessionID("yard"), SessionOptions(codec: .h265))
        #expect(!created && session.id.rawValue == "yard")
        _ = try catalog.put(SessionID("yard"), SessionOptions())
        // frametap sync names its owner in the PUT that restates a camera: the file still keeps it.
        _ = try catalog.put(SessionID("yard"), SessionOptions(codec: .h265, owner: .some(try SessionOwner("frametap-sync"))))
        #expect(try catalog.registry.session(SessionID("yard")).status().standing == .declared)
        do {
            _ = try catalog.put(SessionID("yard"), SessionOptions(quality: 40))
            Issue.record("a declared session was changed")
        } catch {
            #expect(error.code == .declaredSession)
        }
        #expect(try catalog.registry.session(SessionID("yard")).status().quality != 40)
    }

    @Test func declaredSessionsOutliveTheIdleTimeout() throws {
        let clock = ManualClock()
        let catalog = makeCatalog(testConfiguration(idleTimeout: .seconds(10)), clock: clock)
        _ = catalog.declare([try declaration("declared")])
        _ = try catalog.put(SessionID("made"), SessionOptions())
        _ = try catalog.registry.openSession(SessionID("pushed"))
        clock.advance(by: .seconds(11))
        #expect(catalog.registry.evictIdle().map(\.rawValue) == ["made", "pushed"])
        clock.advance(by: .seconds(3600))
        #expect(catalog.registry.evictIdle().isEmpty)
        #expect(catalog.registry.find(try SessionID("declared")) != nil)
    }

    /// One session added, one removed, one unchanged (its decoder and counters carry on: the
    /// same session, not a new one), one changed in place, one restarted.
    @Test func aReadingAppliesExactlyTheDifference() async throws {
        let catalog = makeCatalog()
        _ = catalog.declare([
            try declaration("kept"), try declaration("gone"), try declaration("tuned", quality: 80),
            try declaration("recoded", codec: .h264),
        ])
        let kept = try catalog.registry.session(SessionID("kept"))
        let tuned = try catalog.registry.session(SessionID("tuned"))
        let recoded = try catalog.registry.session(SessionID("recoded"))
        let gone = try catalog.registry.session(SessionID("gone"))
        let summary = try await push(try Fixtures.bytes("baseline_176x144.264"), to: kept)
        #expect(summary.frames == 20)
        let decodedBefore = kept.status().counters.framesDecoded

        let outcome = catalog.declare([
            try declaration("kept"), try declaration("tuned", quality: 50), try declaration("recoded", codec: .h265),
            try declaration("added"),
        ])
        #expect(
            outcome.changes == ["created": ["added"], "removed": ["gone"], "updated": ["tuned"], "restarted": ["recoded"]])
        #expect(outcome.plan.unchanged.map(\.rawValue) == ["kept"])
        #expect(catalog.registry.find(try SessionID("kept")) === kept)
        #expect(kept.status().counters.framesDecoded == decodedBefore && decodedBefore == 20)
        #expect(kept.latestSequence != nil)
        #expect(gone.isClosed)
        #expect(catalog.registry.find(try SessionID("gone")) == nil)
        #expect(catalog.registry.find(try SessionID("tuned")) === tuned)
        #expect(tuned.status().quality == 50)
        let restarted = try catalog.registry.session(SessionID("recoded"))
        #expect(restarted !== recoded && recoded.isClosed)
        #expect(restarted.status().codec == .h265)
        #expect(catalog.registry.find(try SessionID("added"))?.standing == .declared)
    }

    /// A member the file no longer says goes back to the server's default.
    @Test func aMemberTakenOutOfTheFileGoesBackToTheDefault() throws {
        let catalog = makeCatalog()
        _ = catalog.declare([try declaration("cam", decode: .keyframes, quality: 30)])
        _ = catalog.declare([try declaration("cam")])
        let status = try catalog.registry.session(SessionID("cam")).status()
        #expect(status.decode == .all)
        #expect(status.quality == ServerConfiguration().defaultQuality)
    }

    @Test func theFileTakesOverAClientsSessionOfItsID() throws {
        let catalog = makeCatalog()
        let (made, _) = try catalog.put(SessionID("cam"), SessionOptions(quality: 40))
        _ = catalog.declare([try declaration("cam", quality: 70)])
        let declared = try catalog.registry.session(SessionID("cam"))
        #expect(made.isClosed && declared !== made)
        #expect(declared.standing == .declared && declared.status().quality == 70)
    }

    @Test func aDeclarationThatCannotBeMadeIsTriedAgainAtTheNextReading() throws {
        let catalog = makeCatalog(testConfiguration(maxSessions: 1))
        let declarations = [try declaration("first"), try declaration("second")]
        let outcome = catalog.declare(declarations)
        #expect(outcome.failed.map(\.id.rawValue) == ["second"])
        #expect(outcome.failed.first?.error.code == .tooManySessions)
        #expect(outcome.changes == ["created": ["first"], "failed": ["second"]])
        catalog.registry.limits.update { $0.maxSessions = 2 }
        let again = catalog.declare(declarations)
        #expect(again.failed.isEmpty)
        #expect(again.changes == ["created": ["second"]])
        #expect(catalog.registry.find(try SessionID("second"))?.standing == .declared)
    }

    /// The file is written with the authority that sets `--allow-sources`: its pulls need no
    /// entry, where a client's `PUT` of the same URL is refused.
    @Test func declaredPullsNeedNoAllowListEntry() throws {
        let catalog = makeCatalog()
        #expect(catalog.registry.limits.current.sourcePolicy == .none)
        _ = catalog.declare([try declaration("door", url: "rtsp://127.0.0.1:9/door")])
        let door = try catalog.registry.session(SessionID("door"))
        #expect(door.isPulling)
        #expect(door.status().source?.url == "rtsp://127.0.0.1:9/door")
        let other = try SessionID("other")
        let spec = PullSourceSpec(url: try SourceURL("rtsp://127.0.0.1:9/door"))
        do throws(SessionError) {
            _ = try catalog.put(other, SessionOptions(source: .some(spec)))
            Issue.record("a client's pull outside --allow-sources was admitted")
        } catch {
            #expect(error.code == .container(.sourceNotAllowed))
        }
        _ = catalog.declare([])
        #expect(door.isClosed)
    }

    /// `--max-sessions` and the other limits a reading may change hold from the next session on.
    @Test func runtimeLimitsHoldFromTheNextSession() throws {
        let catalog = makeCatalog(testConfiguration(maxSessions: 2))
        _ = try catalog.put(SessionID("a"), SessionOptions())
        _ = try catalog.put(SessionID("b"), SessionOptions())
        catalog.registry.limits.update { $0.maxSessions = 1 }
        #expect(catalog.registry.count == 2, "a lower limit removes no session")
        #expect(throws: SessionError.self) { _ = try catalog.put(SessionID("c"), SessionOptions()) }
        catalog.registry.limits.update { $0.maxSessions = 3 }
        _ = try catalog.put(SessionID("c"), SessionOptions())
    }
}
