@testable import Containers
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

    @Test("a host holds a colon only as a bracketed IPv6 address; what is opened is rebuilt from the checked parts")
    func oneReading() throws {
        for bad in [
            "rtsp://127.0.0.3:19403:cam.example.com:554/x", "rtmp://a:1:b/live", "srt://h:1:2", "rtsp://cam.example.com:554:80/x",
            "rtsp://[127.0.0.1]/x", "rtsp://[::1]x/y", "rtsp://h:+554/x", "rtsp://h:554 /x", "rtsp://h:5x4/x", "rtsp://h:/x",
            "rtsp://%31%32%37.0.0.1/x", "rtsp://" + String(repeating: "a", count: 254) + "/x",
            "srt://h:9000?mode=listener", "srt://h:9000?latency=20&MODE=rendezvous", "srt://h:9000?passphrase=short",
            "srt://h:9000?passphrase=" + String(repeating: "p", count: 80),
        ] {
            #expect(throws: ContainerError.self, "\(bad)") { try SourceURL(bad) }
        }
        let tricky = try SourceURL("rtsp://a@b@127.0.0.2:8554/x?y=1#frag:1@evil")
        #expect(tricky.host == "127.0.0.2")
        #expect(tricky.port == 8554)
        #expect(tricky.openedText() == "rtsp://a@b@127.0.0.2:8554/x?y=1")
        #expect(try SourceURL("RTSP://Cam.Example.COM/x").openedText() == "rtsp://cam.example.com:554/x")
        #expect(try SourceURL("rtsp://[FD00::1]/x").openedText() == "rtsp://[fd00::1]:554/x")
        #expect(try SourceURL("srt://h:0900?mode=caller").openedText() == "srt://h:900/?mode=caller")
        #expect(try SourceURL("srt://h:9000?passphrase=ten%20chars!").port == 9000)
        #expect(try SourceURL("rtsp://h:554/x").openedText(host: "127.0.0.1", port: 40000) == "rtsp://127.0.0.1:40000/x")
        // At the length limit, a URL whose opened form is longer (the default port, a '/' before
        // its query) is refused: what is opened and saved must read back.
        let query = "?" + String(repeating: "a", count: 4096 - "srt://h:9000?".utf8.count)
        #expect(throws: ContainerError.self) { try SourceURL("srt://h:9000" + query) }
        let path = "/" + String(repeating: "b", count: 4096 - "rtsp://h/".utf8.count)
        #expect(throws: ContainerError.self) { try SourceURL("rtsp://h" + path) }
        let fits = try SourceURL("rtsp://h:554/" + String(repeating: "b", count: 4096 - "rtsp://h:554/".utf8.count))
        #expect(try SourceURL(fits.openedText()) == fits)
    }

    /// Camera URL forms as their makers document them, and what may be shown of each.
    static let cameraURLs: [(maker: String, url: String, shown: String)] = [
        ("Hikvision", "rtsp://admin:Hik12345@10.0.0.64:554/Streaming/Channels/101", "rtsp://***@10.0.0.64:554/Streaming/Channels/101"),
        ("Hikvision ISAPI", "http://admin:Hik12345@10.0.0.64/ISAPI/Streaming/channels/101/picture?auth=YWRtaW46SGlr",
         "http://***@10.0.0.64:80/ISAPI/Streaming/channels/101/picture?auth=***"),
        ("Dahua", "rtsp://admin:Dah12345@10.0.0.65:554/cam/realmonitor?channel=1&subtype=0",
         "rtsp://***@10.0.0.65:554/cam/realmonitor?channel=1&subtype=0"),
        ("Axis", "rtsp://root:Axis1234@10.0.0.66/axis-media/media.amp?videocodec=h264&resolution=640x480",
         "rtsp://***@10.0.0.66:554/axis-media/media.amp?videocodec=h264&resolution=640x480"),
        ("Xiongmai/XMEye", "rtsp://10.0.0.67:554/user=admin&password=Xm1234&channel=1&stream=0.sdp?",
         "rtsp://10.0.0.67:554/user=admin&password=***&channel=1&stream=0.sdp?"),
        ("Xiongmai/XMEye (joined)", "rtsp://10.0.0.67:554/user=admin_password=tlJw_pbo6_channel=1_stream=0.sdp?real_stream",
         "rtsp://10.0.0.67:554/user=admin_password=***_channel=1_stream=0.sdp?real_stream"),
        ("Reolink", "rtsp://admin:Reo1234@10.0.0.68:554/h264Preview_01_main", "rtsp://***@10.0.0.68:554/h264Preview_01_main"),
        ("Reolink RTMP", "rtmp://10.0.0.68/bcs/channel0_main.bcs?channel=0&stream=0&user=admin&password=Reo1234",
         "rtmp://10.0.0.68:1935/bcs/channel0_main.bcs?channel=0&stream=0&user=admin&password=***"),
        ("Reolink HTTP", "http://10.0.0.68/cgi-bin/api.cgi?cmd=Snap&channel=0&rs=wuuPhkmU&token=b5b2cbd1",
         "http://10.0.0.68:80/cgi-bin/api.cgi?cmd=Snap&channel=0&rs=wuuPhkmU&token=***"),
        ("Amcrest", "rtsp://admin:Amc12345@10.0.0.69:554/cam/realmonitor?channel=1&subtype=1",
         "rtsp://***@10.0.0.69:554/cam/realmonitor?channel=1&subtype=1"),
        ("Amcrest HTTP", "http://10.0.0.69/cgi-bin/snapshot.cgi?loginuse=admin&loginpas=Amc12345",
         "http://10.0.0.69:80/cgi-bin/snapshot.cgi?loginuse=admin&loginpas=***"),
        ("; parameters", "rtsp://10.0.0.70/live;password=Semi1234;jsessionid=ABCDEF01", "rtsp://10.0.0.70:554/live;password=***;jsessionid=***"),
        ("signed URL", "https://cdn.example/live.ts?X-Amz-Signature=abc123&Expires=1&sig=def456&api_key=ghi789&access_token=a_b==",
         "https://cdn.example:443/live.ts?X-Amz-Signature=***&Expires=1&sig=***&api_key=***&access_token=***"),
        ("SRT", "srt://10.0.0.71:9000?mode=caller&passphrase=Srt1234567&streamid=%23!::r=live/cam,u=bob",
         "srt://10.0.0.71:9000/?mode=caller&passphrase=***&streamid=***"),
    ]

    @Test("one redaction, checked against camera URL forms (Hikvision, Dahua, Axis, XMEye, Reolink, Amcrest)")
    func cameraForms() throws {
        for camera in Self.cameraURLs {
            let url = try SourceURL(camera.url)
            #expect(url.redacted == camera.shown, "\(camera.maker)")
            #expect(URLRedaction.redact(camera.url) .contains("1234") == false, "\(camera.maker)")
        }
    }

    @Test("URLs inside other text (libavformat's log lines) are redacted the same way")
    func inText() {
        let line = "[rtsp @ 0x1] Status 302: Redirecting to rtsp://admin:pw1@127.0.0.1:40000/user=a&password=pw2/x 'http://u:pw3@h/a?token=pw4'\n"
        let shown = URLRedaction.redactURLs(in: line)
        #expect(shown == "[rtsp @ 0x1] Status 302: Redirecting to rtsp://***@127.0.0.1:40000/user=a&password=***/x 'http://***@h/a?token=***'\n")
        #expect(URLRedaction.redactURLs(in: "no URL here: a=b") == "no URL here: a=b")
    }

    @Test("credentials and secret parameters are left out of what is shown")
    func redaction() throws {
        #expect(try SourceURL("rtsp://admin:pa55@cam:554/s").redacted == "rtsp://***@cam:554/s")
        #expect(try SourceURL("rtsp://admin@cam/s").redacted == "rtsp://***@cam:554/s")
        #expect(try SourceURL("srt://h:9000?mode=caller&passphrase=secret1234").redacted == "srt://h:9000/?mode=caller&passphrase=***")
        #expect(try SourceURL("https://u:p@h/a?token=abc&x=1").redacted == "https://***@h:443/a?token=***&x=1")
        #expect(try SourceURL("rtmp://h/live/cam").description == "rtmp://h:1935/live/cam")
        #expect(!(try SourceURL("rtsp://u:topsecret@h/x").redacted.contains("topsecret")))
        // Short names as whole names, and names percent-encoded to look like others.
        #expect(
            try SourceURL("http://h/live.ts?pw=hunter2&p%61ss=hunter3&access_code=hunter4&codec=h264&code=9").redacted
                == "http://h:80/live.ts?pw=***&p%61ss=***&access_code=***&codec=h264&code=***")
        #expect(URLRedaction.redact("http://h/a?%70%77=hunter5&x=%zz") == "http://h/a?%70%77=***&x=%zz")
        #expect(URLRedaction.redact("rtsp://h/user=admin_pw=hunter6_channel=1") == "rtsp://h/user=admin_pw=***_channel=1")
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
        // A URL with a path, the mistake of a user who pasted a camera's URL, says so.
        for url in ["rtsp://cam.local/stream1", "rtsp://cam.local:554/stream1", "rtsp://10.0.0.7/live/main"] {
            #expect("\(url)") {
                try SourcePolicy(parsing: url)
            } throws: { error in
                "\(error)".contains("not a path")
            }
        }
        #expect(try Self.allowed(try SourcePolicy(parsing: "rtsp://10.0.0.0/8:554"), "rtsp://10.1.2.3:554/x"))
    }
}
