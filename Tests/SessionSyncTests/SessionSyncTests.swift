import Foundation
import FrameTapAPI
import HTTPServer
import Logging
import SessionSync
import Sessions
import SessionsTestSupport
import Testing
import TestSupport
import Timekeeping

#if canImport(Glibc)
    import Glibc
#endif

/// `frametap sync`'s passes against real FrameTap services on loopback: one plays the gateway
/// (it answers the `PUT`s), both are listed as instances. The plan's rules are checked as values.
@Suite("frametap sync: declared sessions kept in place through a gateway", .timeLimit(.minutes(10)))
struct SessionSyncTests {
    static let owner = try! SessionOwner("frametap-sync")

    /// Two services, started and always stopped.
    static func withServices<T>(_ body: (FrameTapService, FrameTapService) throws -> T) throws -> T {
        func make() throws -> FrameTapService {
            var http = HTTPServerConfiguration()
            http.host = "127.0.0.1"
            http.port = 0
            http.threadPoolSize = 2
            http.shutdownGracePeriod = .seconds(2)
            let service = FrameTapService(
                http: http, sessions: try ServerConfiguration().validated(), services: SessionServices.forTests())
            try service.start()
            return service
        }
        let first = try make()
        defer { first.stop() }
        let second = try make()
        defer { second.stop() }
        return try body(first, second)
    }

    static func endpoint(_ port: UInt16) -> HTTPEndpoint { HTTPEndpoint(secure: false, host: "127.0.0.1", port: Int(port)) }

    /// A syncer whose gateway is `gateway` and whose instances are `instances` (nil: the gateway).
    static func syncer(file: String, gateway: UInt16, instances: [UInt16]?, timeout: Duration = .seconds(5)) -> SessionSyncer {
        SessionSyncer(
            settings: SessionSyncer.Settings(
                configurationPath: file, environment: [:], gateway: endpoint(gateway),
                instances: instances.map { InstanceDiscovery(entries: $0.map(endpoint)) }, owner: owner,
                client: SyncClient(token: nil, timeout: timeout, clock: SystemClock())),
            logger: Logger(label: "test.sync"))
    }

    static func temporaryFile(_ text: String) throws -> String {
        let path = NSTemporaryDirectory() + "frametap-sync-\(UUID().uuidString).yaml"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func ids(_ port: UInt16) throws -> [String] {
        let list = try jsonObject(try request(port, "GET", "/sessions").body)["sessions"] as? [[String: Any]] ?? []
        return list.compactMap { $0["id"] as? String }.sorted()
    }

    static func status(_ port: UInt16, _ id: String) throws -> [String: Any]? {
        let answer = try request(port, "GET", "/sessions/\(id)")
        return answer.status == 200 ? try jsonObject(answer.body) : nil
    }

    static func put(_ port: UInt16, _ id: String, _ body: String) throws -> TestResponse {
        try request(port, "PUT", "/sessions/\(id)", headers: [("Content-Type", "application/json")], body: Array(body.utf8))
    }

    @Test("a pass creates the declared sessions (201), the next leaves them as they are (200), and each carries the owner")
    func createsThenKeeps() throws {
        try Self.withServices { gateway, other in
            let file = try Self.temporaryFile(
                """
                sessions:
                  cam1:
                    quality: 60
                  cam2:
                    codec: h265
                    decode: keyframes
                """)
            let syncer = Self.syncer(file: file, gateway: gateway.port, instances: [gateway.port, other.port])
            let first = syncer.runPass()
            #expect(first.succeeded, "\(first.failures)")
            #expect(first.created.map(\.rawValue) == ["cam1", "cam2"])
            #expect(first.deleted.isEmpty)
            let cam1 = try #require(try Self.status(gateway.port, "cam1"))
            #expect(cam1["owner"] as? String == "frametap-sync")
            #expect(cam1["quality"] as? Int == 60)
            #expect(try Self.status(gateway.port, "cam2")?["decode"] as? String == "keyframes")
            #expect(try Self.ids(other.port).isEmpty)

            let second = syncer.runPass()
            #expect(second.succeeded, "\(second.failures)")
            #expect(second.created.isEmpty)
            #expect(second.kept.map(\.rawValue) == ["cam1", "cam2"])
            #expect(second.deleted.isEmpty)
            #expect(try Self.status(gateway.port, "cam1")?["createdAt"] as? String == cam1["createdAt"] as? String)
        }
    }

    @Test("sessions the file no longer declares are deleted; those of other owners or of none are left alone")
    func deletesWhatItCreatedOnly() throws {
        try Self.withServices { gateway, other in
            let file = try Self.temporaryFile("sessions:\n  cam1: {}\n  cam2: {}\n")
            let syncer = Self.syncer(file: file, gateway: gateway.port, instances: [gateway.port, other.port])
            #expect(syncer.runPass().succeeded)
            #expect(try Self.put(other.port, "theirs", #"{"owner": "someone-else"}"#).status == 201)
            #expect(try Self.put(gateway.port, "nobodys", "{}").status == 201)
            // Created by this owner on the other instance, and no longer declared.
            #expect(try Self.put(other.port, "old", #"{"owner": "frametap-sync"}"#).status == 201)

            try "sessions:\n  cam1: {}\n".write(toFile: file, atomically: true, encoding: .utf8)
            let report = syncer.runPass()
            #expect(report.succeeded, "\(report.failures)")
            #expect(Set(report.deleted.map { "\($0.id)@\($0.instance.endpoint.port):\($0.reason.rawValue)" })
                == ["cam2@\(gateway.port):undeclared", "old@\(other.port):undeclared"])
            #expect(try Self.ids(gateway.port) == ["cam1", "nobodys"])
            #expect(try Self.ids(other.port) == ["theirs"])
        }
    }

    @Test("a declared session's second copy, on an instance the gateway does not route it to, is deleted")
    func deletesSecondCopy() throws {
        try Self.withServices { gateway, other in
            let file = try Self.temporaryFile("sessions:\n  cam1: {}\n")
            // As after a gateway lost its table: the camera lives on `other`, the gateway now
            // routes it to `gateway`.
            #expect(try Self.put(other.port, "cam1", #"{"owner": "frametap-sync"}"#).status == 201)
            let report = Self.syncer(file: file, gateway: gateway.port, instances: [gateway.port, other.port]).runPass()
            #expect(report.succeeded, "\(report.failures)")
            #expect(report.created.map(\.rawValue) == ["cam1"])
            #expect(report.deleted.map { "\($0.id)@\($0.instance.endpoint.port):\($0.reason.rawValue)" }
                == ["cam1@\(other.port):duplicate"])
            #expect(try Self.ids(gateway.port) == ["cam1"])
            #expect(try Self.ids(other.port).isEmpty)
            // Through the gateway alone, no copy can be told from another: nothing is deleted.
            #expect(try Self.put(other.port, "cam1", #"{"owner": "frametap-sync"}"#).status == 201)
            let blind = Self.syncer(file: file, gateway: gateway.port, instances: nil).runPass()
            #expect(blind.succeeded && blind.deleted.isEmpty, "\(blind)")
            #expect(try Self.ids(other.port) == ["cam1"])
        }
    }

    @Test("a broken file skips the pass: nothing is deleted, and the failure names the file's line")
    func brokenFileChangesNothing() throws {
        try Self.withServices { gateway, _ in
            let file = try Self.temporaryFile("sessions:\n  cam1: {}\n")
            let syncer = Self.syncer(file: file, gateway: gateway.port, instances: [gateway.port])
            #expect(syncer.runPass().succeeded)
            try "sessions:\n  cam1:\n    qualty: 5\n".write(toFile: file, atomically: true, encoding: .utf8)
            let report = syncer.runPass()
            #expect(!report.succeeded)
            #expect(report.failures.first?.contains("\(file):3:5: sessions.cam1.qualty: unknown option") == true, "\(report.failures)")
            #expect(report.deleted.isEmpty)
            #expect(try Self.ids(gateway.port) == ["cam1"])
        }
    }

    @Test("a gateway that refuses, or never answers, fails the pass within the request's deadline, and the next pass works")
    func failingGateway() throws {
        let file = try Self.temporaryFile("sessions:\n  cam1: {}\n")
        // A port nothing listens on.
        let closed = try Self.listeningSocket()
        close(closed.socket)
        let refused = Self.syncer(file: file, gateway: closed.port, instances: nil, timeout: .seconds(2)).runPass()
        #expect(!refused.succeeded)
        #expect(refused.failures.first?.contains("PUT http://127.0.0.1:\(closed.port)/sessions/cam1") == true, "\(refused.failures)")

        // A listener that never accepts: the kernel completes the connection, nobody answers.
        let silent = try Self.listeningSocket()
        defer { close(silent.socket) }
        let started = ContinuousClock.now
        let hung = Self.syncer(file: file, gateway: silent.port, instances: nil, timeout: .milliseconds(500)).runPass()
        let took = ContinuousClock.now - started
        #expect(!hung.succeeded)
        #expect(hung.failures.contains { $0.contains("no answer in time") }, "\(hung.failures)")
        // The PUT gave up after its 0.5 s and the gateway's listing after another 0.5 s.
        #expect(took < .seconds(4), "\(took)")

        try Self.withServices { gateway, _ in
            let report = Self.syncer(file: file, gateway: gateway.port, instances: nil).runPass()
            #expect(report.succeeded && report.created.map(\.rawValue) == ["cam1"], "\(report)")
        }
    }

    /// A socket listening on a loopback port of the kernel's choosing, never accepting.
    static func listeningSocket() throws -> (socket: Int32, port: UInt16) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 8) == 0 else {
            close(listener)
            throw TestFailure("cannot listen on 127.0.0.1")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        return (listener, UInt16(bigEndian: address.sin_port))
    }
}

/// The plan's rules, as values: which copies of which sessions a pass deletes.
@Suite("frametap sync: what a pass deletes", .timeLimit(.minutes(10)))
struct SyncPlanTests {
    let owner = try! SessionOwner("frametap-sync")
    let a = SyncInstance(HTTPEndpoint(secure: false, host: "10.0.0.1", port: 8080), direct: true)
    let b = SyncInstance(HTTPEndpoint(secure: false, host: "10.0.0.2", port: 8080), direct: true)
    let gateway = SyncInstance(HTTPEndpoint(secure: false, host: "gateway", port: 8080), direct: false)

    func session(_ id: String, _ owner: String?, _ createdAt: String) -> ListedSession {
        ListedSession(id: try! SessionID(id), owner: owner.map { try! SessionOwner($0) }, createdAt: createdAt)
    }

    func ids(_ names: String...) -> Set<SessionID> { Set(names.map { try! SessionID($0) }) }

    func deleted(_ plan: SyncPlan) -> [String] {
        plan.deletions.map { "\($0.id)@\($0.instance.endpoint.host):\($0.reason.rawValue)" }
    }

    @Test("undeclared sessions of this owner go, wherever they are; other owners' and unowned ones stay")
    func undeclared() {
        let plan = SyncPlan(
            owner: owner, declared: ids("cam1"), placed: [try! SessionID("cam1"): "t1"],
            listings: [
                (a, [session("cam1", "frametap-sync", "t1"), session("gone", "frametap-sync", "t2")]),
                (b, [session("gone", "frametap-sync", "t3"), session("theirs", "other", "t4"), session("free", nil, "t5")]),
            ])
        #expect(deleted(plan) == ["gone@10.0.0.1:undeclared", "gone@10.0.0.2:undeclared"])
    }

    @Test("of two copies of a declared session, the one the gateway did not answer from goes")
    func duplicates() {
        let cam1 = try! SessionID("cam1")
        let listings = [(a, [session("cam1", "frametap-sync", "old")]), (b, [session("cam1", "frametap-sync", "new")])]
        #expect(deleted(SyncPlan(owner: owner, declared: [cam1], placed: [cam1: "new"], listings: listings)) == ["cam1@10.0.0.1:duplicate"])
        // Its PUT failed this pass: where it belongs is unknown, nothing goes.
        #expect(SyncPlan(owner: owner, declared: [cam1], placed: [:], listings: listings).deletions.isEmpty)
        // The copy that answered is on an instance that did not list this pass: nothing goes.
        #expect(SyncPlan(owner: owner, declared: [cam1], placed: [cam1: "new"], listings: [listings[0]]).deletions.isEmpty)
        // Another owner's copy is not ours to remove.
        let theirs = [(a, [session("cam1", "other", "old")]), (b, [session("cam1", "frametap-sync", "new")])]
        #expect(SyncPlan(owner: owner, declared: [cam1], placed: [cam1: "new"], listings: theirs).deletions.isEmpty)
    }

    @Test("through the gateway alone, only undeclared sessions go (once), never a copy")
    func throughTheGateway() {
        let cam1 = try! SessionID("cam1")
        let plan = SyncPlan(
            owner: owner, declared: [cam1], placed: [cam1: "new"],
            listings: [(gateway, [session("cam1", "frametap-sync", "old"), session("gone", "frametap-sync", "t")])])
        #expect(deleted(plan) == ["gone@gateway:undeclared"])
    }
}
