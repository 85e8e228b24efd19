import Containers
import Foundation
import Ingest
import SessionCatalog
import Sessions
import Testing
import TestSupport
import VideoCoding

@Suite(.timeLimit(.minutes(10)))
struct SessionStateStoreTests {
    private let pull = SessionOptions(
        codec: .h264, decode: .onDemand, quality: 70,
        source: .some(PullSourceSpec(url: try! SourceURL("rtsp://viewer:s%40cret@127.0.0.1:9/cam"), transport: .udp)))

    @Test func definitionsSurviveReopeningTheDirectory() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        do {
            let (store, saved) = try SessionStateStore.open(directory: directory.path)
            #expect(saved.isEmpty, "a new directory holds nothing")
            try store.save([try SessionID("cam"): pull, try SessionID("push"): SessionOptions(codec: .h265)])
        }
        let (_, saved) = try SessionStateStore.open(directory: directory.path)
        #expect(saved == [try SessionID("cam"): pull, try SessionID("push"): SessionOptions(codec: .h265)])

        let attributes = try FileManager.default.attributesOfItem(atPath: directory.file(SessionStateStore.fileName))
        #expect((attributes[.posixPermissions] as? Int) == 0o600, "source URLs carry credentials")
    }

    /// How a pull connects is kept with it; `always`, the default, is written as nothing.
    @Test func howAPullConnectsIsKept() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var onDemand = pull
        onDemand.source = .some(PullSourceSpec(url: try SourceURL("rtsp://127.0.0.1:9/door"), connect: .onDemand))
        do {
            let (store, _) = try SessionStateStore.open(directory: directory.path)
            try store.save([try SessionID("door"): onDemand, try SessionID("cam"): pull])
        }
        let (_, kept) = try SessionStateStore.open(directory: directory.path)
        #expect(kept == [try SessionID("door"): onDemand, try SessionID("cam"): pull])
        let text = try String(contentsOfFile: directory.file(SessionStateStore.fileName), encoding: .utf8)
        #expect(text.components(separatedBy: "\"connect\"").count - 1 == 1, "\(text)")
    }

    @Test func aSecondServerCannotUseTheSameDirectory() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (first, _) = try SessionStateStore.open(directory: directory.path)
        #expect {
            _ = try SessionStateStore.open(directory: directory.path)
        } throws: { error in
            "\(error)".contains("another frametap serve uses it")
        }
        _ = first
    }

    /// A directory the state file cannot be written in stops the start, as one that cannot be
    /// read does, instead of failing every PUT later. (Tests run as root, which every mode lets
    /// write: a folder where the file's first step goes stands in for a read-only one.)
    @Test func aDirectoryThatCannotBeWrittenStopsTheStart() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try FileManager.default.createDirectory(
            atPath: directory.file(SessionStateStore.fileName + ".tmp"), withIntermediateDirectories: false)
        #expect {
            _ = try SessionStateStore.open(directory: directory.path)
        } throws: { error in
            "\(error)".contains("cannot write in the state directory \(directory.path): Is a directory")
        }
    }

    @Test func aMissingDirectoryIsMade() throws {
        let parent = try TemporaryDirectory()
        defer { parent.remove() }
        let (store, saved) = try SessionStateStore.open(directory: parent.file("state"))
        #expect(saved.isEmpty)
        try store.save([:])
        #expect(FileManager.default.fileExists(atPath: parent.file("state/\(SessionStateStore.fileName)")))
    }

    /// A file cut short, damaged, empty or of another format is never read as fewer sessions:
    /// opening fails, naming it, and a copy is kept beside it.
    @Test(arguments: ["torn", "damaged", "empty", "foreign", "newer"])
    func anUnreadableFileStopsTheStartAndIsKept(damage: String) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        do {
            let (store, _) = try SessionStateStore.open(directory: directory.path)
            try store.save([try SessionID("cam"): pull, try SessionID("yard"): SessionOptions(decode: .keyframes)])
        }
        let path = directory.file(SessionStateStore.fileName)
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        switch damage {
        case "torn": bytes.removeLast(7)
        case "damaged": bytes[bytes.count - 5] ^= 0x20
        case "empty": bytes = []
        case "foreign": bytes = Array("{\"sessions\": {}}\n".utf8)
        default: bytes = Array("frametap-sessions 2 2 00000000\n{}".utf8)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect {
            _ = try SessionStateStore.open(directory: directory.path)
        } throws: { error in
            let text = "\(error)"
            return text.contains(path) && text.contains("A copy is kept as") && text.contains("move \(path) away")
        }
        let copies = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".unreadable-") }
        #expect(copies.count == 1)
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: directory.file(copies[0])))) == bytes)
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == bytes, "the file itself is left as it was")
    }

    /// A temporary file left by a write that never finished was never answered: it is dropped.
    @Test func aLeftoverTemporaryFileIsIgnored() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        do {
            let (store, _) = try SessionStateStore.open(directory: directory.path)
            try store.save([try SessionID("cam"): SessionOptions(quality: 10)])
        }
        try Data("frametap-sessions 1 99 0000".utf8).write(to: URL(fileURLWithPath: directory.file(SessionStateStore.fileName + ".tmp")))
        let (_, saved) = try SessionStateStore.open(directory: directory.path)
        #expect(saved == [try SessionID("cam"): SessionOptions(quality: 10)])
        #expect(!FileManager.default.fileExists(atPath: directory.file(SessionStateStore.fileName + ".tmp")))
    }

    /// Each PUT and DELETE is on disk when it returns; PUTs merge into the definition.
    @Test func putAndDeleteAreOnDiskWhenTheyReturn() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (store, saved) = try SessionStateStore.open(directory: directory.path)
        let catalog = makeCatalog(store: store, saved: saved)
        func onDisk() throws -> [SessionID: SessionOptions] {
            try SessionStateStore.peek(directory: directory.path)
        }
        let (session, created) = try catalog.put(SessionID("cam"), SessionOptions(codec: .h264))
        #expect(created && session.standing == SessionStanding(origin: .api, persisted: true))
        #expect(try onDisk() == [try SessionID("cam"): SessionOptions(codec: .h264)])
        _ = try catalog.put(SessionID("cam"), SessionOptions(quality: 60))
        #expect(try onDisk() == [try SessionID("cam"): SessionOptions(codec: .h264, quality: 60)])
        _ = try catalog.put(SessionID("cam"), SessionOptions(source: .some(nil)))
        #expect(try onDisk() == [try SessionID("cam"): SessionOptions(codec: .h264, quality: 60)])
        // Who keeps it (`frametap sync`'s mark) is kept too, until a PUT clears it.
        let owner = try SessionOwner("frametap-sync")
        _ = try catalog.put(SessionID("cam"), SessionOptions(owner: .some(owner)))
        let owned = SessionOptions(codec: .h264, quality: 60, owner: .some(owner))
        #expect(try onDisk() == [try SessionID("cam"): owned])
        _ = try catalog.put(SessionID("cam"), SessionOptions(owner: .some(nil)))
        #expect(try onDisk() == [try SessionID("cam"): SessionOptions(codec: .h264, quality: 60)])
        // A session a push made is kept from its first PUT on.
        _ = try catalog.registry.openSession(SessionID("pushed"))
        #expect(try catalog.registry.session(SessionID("pushed")).standing.expiresWhenIdle)
        _ = try catalog.put(SessionID("pushed"), SessionOptions(decode: .keyframes))
        #expect(try !catalog.registry.session(SessionID("pushed")).standing.expiresWhenIdle)
        #expect(try onDisk().count == 2)
        try catalog.delete(SessionID("cam"))
        #expect(try onDisk() == [try SessionID("pushed"): SessionOptions(decode: .keyframes)])
        #expect(catalog.persistedCount == 1)
    }

    /// At start the kept sessions come back, pulls pulling; a declared id is the file's.
    @Test func keptSessionsComeBackAtStart() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try serverRanBefore(in: directory, making: ["cam": pull, "push": SessionOptions(codec: .h265), "soon-declared": SessionOptions()])
        let (store, saved) = try SessionStateStore.open(directory: directory.path)
        var configuration = testConfiguration()
        configuration.sourcePolicy = try SourcePolicy(parsing: "rtsp://127.0.0.1")
        let catalog = makeCatalog(configuration, store: store, saved: saved)
        _ = catalog.declare([try declaration("soon-declared", quality: 20)])
        let outcome = catalog.restore()
        #expect(outcome.restored.map(\.rawValue) == ["cam", "push"])
        #expect(outcome.failed.isEmpty)
        let cam = try catalog.registry.session(SessionID("cam"))
        #expect(cam.isPulling && cam.standing == SessionStanding(origin: .api, persisted: true))
        #expect(cam.status().decode == .onDemand && cam.status().quality == 70)
        #expect(try catalog.registry.session(SessionID("push")).status().codec == .h265)
        #expect(try catalog.registry.session(SessionID("soon-declared")).standing == .declared)
        #expect(try SessionStateStore.peek(directory: directory.path).keys.map(\.rawValue).sorted() == ["cam", "push"])
        catalog.registry.shutdown()
    }

    /// A kept session that cannot be made again (its source no longer allowed) stays kept, shown
    /// without its pull; a DELETE forgets it.
    @Test func aKeptSessionThatCannotBeMadeAgainStaysKept() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try serverRanBefore(in: directory, making: ["cam": pull])
        let (store, saved) = try SessionStateStore.open(directory: directory.path)
        let catalog = makeCatalog(store: store, saved: saved)
        let outcome = catalog.restore()
        #expect(outcome.failed.map(\.error.code) == [.container(.sourceNotAllowed)])
        #expect(catalog.persistedCount == 1)
        try catalog.delete(SessionID("cam"))
        #expect(try SessionStateStore.peek(directory: directory.path).isEmpty)
    }

    /// A server that ran before in `directory`, allowed to pull from 127.0.0.1, made `sessions`
    /// by PUT (so they were kept) and stopped.
    private func serverRanBefore(in directory: TemporaryDirectory, making sessions: KeyValuePairs<String, SessionOptions>) throws {
        let (store, saved) = try SessionStateStore.open(directory: directory.path)
        let catalog = makeCatalog(store: store, saved: saved)
        catalog.registry.limits.update { $0.sourcePolicy = try! SourcePolicy(parsing: "rtsp://127.0.0.1") }
        for (id, options) in sessions { _ = try catalog.put(SessionID(id), options) }
        catalog.registry.shutdown()
    }
}

extension SessionStateStore {
    /// What the file holds now, read as a second reader would (no lock).
    static func peek(directory: String) throws -> [SessionID: SessionOptions] {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + fileName))
        return try definitions(in: Array(bytes))
    }
}
