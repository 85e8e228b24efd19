import Containers
import Testing

@Suite("SourceURL: parsing and what may be shown", .timeLimit(.minutes(10)))
struct SourceURLTests {
    @Test("schemes, hosts, default ports, paths")
    func parsing() throws {
        let rtsp = try SourceURL("rtsp://camera.local/stream1")
        #expect(rtsp.scheme == .rtsp)
        #expect(rtsp.host == "camera.local")
        #expect(rtsp.port == 554)
        #expect(rtsp.pathAndQuery == "/stream1")
        #expect(try SourceURL("RTMP://Host.Example:1936/live/key").host == "host.example")
        #expect(try SourceURL("rtmp://h/live").port == 1935)
        #expect(try SourceURL("https://h").port == 443)
        #expect(try SourceURL("https://h").pathAndQuery == "/")
        #expect(try SourceURL("srt://10.0.0.1:9000?mode=caller").port == 9000)
        let v6 = try SourceURL("rtsp://[fd00::1]:8554/cam")
        #expect(v6.host == "fd00::1")
        #expect(v6.port == 8554)
        for bad in ["ftp://h/x", "rtsp://", "rtsp://h:0/x", "rtsp://h:99999/x", "srt://h", "no scheme", "rtsp://h/a b", "rtsp://[::1/x"] {
            #expect(throws: ContainerError.self, "\(bad)") { try SourceURL(bad) }
        }
    }

    @Test("credentials and secret parameters are left out of what is shown")
    func redaction() throws {
        #expect(try SourceURL("rtsp://admin:pa55@cam:554/s").redacted == "rtsp://***@cam:554/s")
        #expect(try SourceURL("rtsp://admin@cam/s").redacted == "rtsp://***@cam:554/s")
        #expect(try SourceURL("srt://h:9000?mode=caller&passphrase=secret123").redacted == "srt://h:9000/?mode=caller&passphrase=***")
        #expect(try SourceURL("https://u:p@h/a?token=abc&x=1").redacted == "https://***@h:443/a?token=***&x=1")
        #expect(try SourceURL("rtmp://h/live/cam").description == "rtmp://h:1935/live/cam")
        #expect(!(try SourceURL("rtsp://u:topsecret@h/x").redacted.contains("topsecret")))
    }

    @Test("redirect locations resolve against the URL")
    func resolving() throws {
        let base = try SourceURL("http://a.example:8080/cams/one.ts?x=1")
        #expect(try base.resolving("/two.ts").redacted == "http://a.example:8080/two.ts")
        #expect(try base.resolving("three.ts").redacted == "http://a.example:8080/cams/three.ts")
        #expect(try base.resolving("//b.example/x").host == "b.example")
        #expect(try base.resolving("https://c.example/y").scheme == .https)
    }
}

@Suite("SourcePolicy: --allow-sources", .timeLimit(.minutes(10)))
struct SourcePolicyTests {
    static func allowed(_ policy: SourcePolicy, _ url: String, resolve: @escaping (String) -> [IPAddress] = { _ in [] }) throws -> Bool {
        policy.check(try SourceURL(url), resolve: resolve) == nil
    }

    @Test("nothing is allowed without entries")
    func off() throws {
        #expect(try SourcePolicy(parsing: "").allowsAnything == false)
        #expect(SourcePolicy.none.check(try SourceURL("rtsp://127.0.0.1/x"))?.code == .sourceNotAllowed)
    }

    @Test("schemes, names, suffixes, ports")
    func names() throws {
        let policy = try SourcePolicy(parsing: "rtsp://cam1.example.com, *://*.cams.example.com, srt://relay.example.com:9000")
        #expect(try Self.allowed(policy, "rtsp://cam1.example.com/s"))
        #expect(try Self.allowed(policy, "rtsp://CAM1.example.com:8554/s"))
        #expect(try !Self.allowed(policy, "rtmp://cam1.example.com/live/s"))
        #expect(try Self.allowed(policy, "http://a.cams.example.com/x.ts"))
        #expect(try Self.allowed(policy, "rtmp://b.c.cams.example.com/live/s"))
        #expect(try !Self.allowed(policy, "http://cams.example.com.evil.net/x"))
        #expect(try !Self.allowed(policy, "http://evilcams.example.com/x"))
        #expect(try Self.allowed(policy, "srt://relay.example.com:9000"))
        #expect(try !Self.allowed(policy, "srt://relay.example.com:9001"))
        // A name entry never matches an address, even one the name resolves to.
        #expect(try !Self.allowed(policy, "rtsp://10.1.1.1/s"))
    }

    @Test("addresses and networks, IPv4 and IPv6, and names whose every address is inside")
    func networks() throws {
        let policy = try SourcePolicy(parsing: "rtsp://10.0.0.0/8,http://192.168.1.20,*://[fd00::]/8,rtmp://127.0.0.1:1935")
        #expect(try Self.allowed(policy, "rtsp://10.200.3.4/cam"))
        #expect(try !Self.allowed(policy, "rtsp://11.0.0.1/cam"))
        #expect(try !Self.allowed(policy, "http://10.0.0.1/x"))
        #expect(try Self.allowed(policy, "http://192.168.1.20:8080/x"))
        #expect(try !Self.allowed(policy, "http://192.168.1.21/x"))
        #expect(try Self.allowed(policy, "srt://[fd12::5]:9000"))
        #expect(try !Self.allowed(policy, "srt://[fe80::1]:9000"))
        #expect(try Self.allowed(policy, "rtsp://[::ffff:10.1.2.3]/x"))
        #expect(try Self.allowed(policy, "rtmp://127.0.0.1/live"))
        #expect(try !Self.allowed(policy, "rtmp://127.0.0.1:1936/live"))
        let inside = [IPAddress("10.1.1.1")!, IPAddress("10.2.2.2")!]
        #expect(try Self.allowed(policy, "rtsp://cam.lan/s", resolve: { _ in inside }))
        #expect(try !Self.allowed(policy, "rtsp://cam.lan/s", resolve: { _ in inside + [IPAddress("169.254.169.254")!] }))
        #expect(try !Self.allowed(policy, "rtsp://cam.lan/s", resolve: { _ in [] }))
    }

    @Test("anything goes with *://*; malformed entries are refused at start-up")
    func parsing() throws {
        #expect(try Self.allowed(try SourcePolicy(parsing: "*://*"), "https://anything.example/x"))
        for bad in ["rtsp", "gopher://x", "rtsp://10.0.0.0/33", "rtsp://name/8", "rtsp://a*b.example", "rtsp://h:0", "rtsp://[fd00::"] {
            #expect(throws: ContainerError.self, "\(bad)") { try SourcePolicy(parsing: bad) }
        }
    }
}
