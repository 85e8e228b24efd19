import Containers
import Decoding
import Ingest
import SessionCatalog
import Sessions
import Testing
import VideoCoding

@Suite(.timeLimit(.minutes(10)))
struct DeclarationPlanTests {
    @Test func addedRemovedAndUnchangedDeclarations() throws {
        let old = [try declaration("keep"), try declaration("gone", decode: .keyframes)]
        let new = [try declaration("added"), try declaration("keep")]
        let plan = DeclarationPlan(from: old, to: new)
        #expect(plan.create.map(\.id) == [try SessionID("added")])
        #expect(plan.remove == [try SessionID("gone")])
        #expect(plan.unchanged == [try SessionID("keep")])
        #expect(plan.update.isEmpty && plan.restart.isEmpty)
        #expect(!plan.isEmpty)
    }

    @Test func theSameFileChangesNothing() throws {
        let declarations = [try declaration("a", url: "rtsp://cam.example/1"), try declaration("b", codec: .h265, quality: 70)]
        let plan = DeclarationPlan(from: declarations, to: declarations)
        #expect(plan.isEmpty)
        #expect(plan.unchanged.map(\.rawValue) == ["a", "b"])
    }

    /// Decode mode and quality change while the stream runs; the rest is another stream.
    @Test(arguments: [
        ("decode", false), ("quality", false), ("decode and quality", false), ("url", true), ("transport", true),
        ("connect", true),
        ("codec", true), ("backend", true), ("source removed", true),
    ])
    func whatChangesInPlaceAndWhatRestarts(change: String, restarts: Bool) throws {
        let before = try declaration("cam", url: "rtsp://cam.example/1", codec: .h264, decode: .all, quality: 80)
        let after: SessionDeclaration
        switch change {
        case "decode": after = try declaration("cam", url: "rtsp://cam.example/1", codec: .h264, decode: .onDemand, quality: 80)
        case "quality": after = try declaration("cam", url: "rtsp://cam.example/1", codec: .h264, decode: .all, quality: 60)
        case "decode and quality": after = try declaration("cam", url: "rtsp://cam.example/1", codec: .h264, quality: 60)
        case "url": after = try declaration("cam", url: "rtsp://cam.example/2", codec: .h264, decode: .all, quality: 80)
        case "transport":
            after = try declaration("cam", url: "rtsp://cam.example/1", transport: .udp, codec: .h264, decode: .all, quality: 80)
        case "connect":
            after = try declaration("cam", url: "rtsp://cam.example/1", connect: .onDemand, codec: .h264, decode: .all, quality: 80)
        case "codec": after = try declaration("cam", url: "rtsp://cam.example/1", codec: .h265, decode: .all, quality: 80)
        case "backend":
            after = try declaration("cam", url: "rtsp://cam.example/1", codec: .h264, backend: .software, decode: .all, quality: 80)
        default: after = try declaration("cam", codec: .h264, decode: .all, quality: 80)
        }
        let plan = DeclarationPlan(from: [before], to: [after])
        #expect(plan.restart.map(\.id.rawValue) == (restarts ? ["cam"] : []))
        #expect(plan.update.map(\.id.rawValue) == (restarts ? [] : ["cam"]))
        #expect(plan.update.first.map { $0.options == after.options } ?? true, "the update carries the new declaration")
        #expect(plan.create.isEmpty && plan.remove.isEmpty && plan.unchanged.isEmpty)
    }

    /// `source:` left out and `source: null` both mean no pull: not another stream.
    @Test func aMissingAndANullSourceAreTheSameStream() throws {
        let missing = SessionDeclaration(id: try SessionID("cam"), options: SessionOptions(decode: .all))
        let null = SessionDeclaration(id: try SessionID("cam"), options: SessionOptions(decode: .keyframes, source: .some(nil)))
        let plan = DeclarationPlan(from: [missing], to: [null])
        #expect(plan.update.count == 1 && plan.restart.isEmpty)
    }

    /// The new file's order is the order sessions are made in; where a declaration sits in the
    /// file is no part of what it declares.
    @Test func createsInTheFilesOrderAndIgnoresWhereTheyAreWritten() throws {
        let old = [SessionDeclaration(id: try SessionID("kept"), options: SessionOptions(), place: "a.yaml:3:3")]
        let new = [
            try declaration("z"), try declaration("a"),
            SessionDeclaration(id: try SessionID("kept"), options: SessionOptions(), place: "a.yaml:9:3"), try declaration("m"),
        ]
        let plan = DeclarationPlan(from: old, to: new)
        #expect(plan.create.map(\.id.rawValue) == ["z", "a", "m"])
        #expect(plan.unchanged.map(\.rawValue) == ["kept"])
    }

    @Test func everythingRemovedWhenTheFileDeclaresNothing() throws {
        let plan = DeclarationPlan(from: [try declaration("a"), try declaration("b")], to: [])
        #expect(plan.remove.map(\.rawValue) == ["a", "b"])
        #expect(plan.create.isEmpty && plan.unchanged.isEmpty)
    }
}

func declaration(
    _ id: String, url: String? = nil, transport: SourceTransport? = nil, connect: ConnectMode = .always, codec: VideoCodec? = nil,
    backend: DecoderBackendChoice? = nil, decode: DecodeMode? = nil, quality: Int? = nil
) throws -> SessionDeclaration {
    var options = SessionOptions(backend: backend, codec: codec, decode: decode, quality: quality)
    if let url { options.source = .some(PullSourceSpec(url: try SourceURL(url), transport: transport, connect: connect)) }
    return SessionDeclaration(id: try SessionID(id), options: options)
}
