@testable import Containers
import Testing

/// What libavformat's RTSP demuxer is allowed to read of what a camera says (`RTSPAnswerCheck`).
@Suite("RTSP answers checked before the demuxer reads them", .timeLimit(.minutes(10)))
struct RTSPAnswerCheckTests {
    static func check(allowing allowed: String = "rtsp://127.0.0.2") throws -> RTSPAnswerCheck {
        RTSPAnswerCheck(
            current: try SourceURL("rtsp://user:pw@127.0.0.2:8554/cam"), connectedAddress: IPAddress("127.0.0.2")!,
            policy: try SourcePolicy(parsing: allowed), relayHost: "127.0.0.1", relayPort: 40000)
    }

    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test("a SETUP answer over UDP always names the checked source; another host is refused unless allowed")
    func transports() throws {
        var check = try Self.check()
        let own = Self.text(try check.take(Array("RTSP/1.0 200 OK\r\nCSeq: 3\r\nTransport: RTP/AVP;unicast;client_port=5000-5001;server_port=6000-6001;ssrc=1234;mode=play\r\nSession: 1\r\n\r\n".utf8)))
        #expect(own.contains("Transport: RTP/AVP/UDP;unicast;client_port=5000-5001;server_port=6000-6001;source=127.0.0.2\r\n"), "\(own)")
        #expect(own.hasPrefix("RTSP/1.0 200 OK\r\nCSeq: 3\r\n"))
        let elsewhere = Array("RTSP/1.0 200 OK\r\nCSeq: 3\r\nTransport: RTP/AVP;unicast;server_port=6000-6001;source=127.0.0.3\r\n\r\n".utf8)
        #expect(throws: ContainerError.self) { var fresh = try Self.check(); _ = try fresh.take(elsewhere) }
        var allowing = try Self.check(allowing: "rtsp://127.0.0.2,rtsp://127.0.0.3")
        #expect(Self.text(try allowing.take(elsewhere)).contains(";source=127.0.0.3\r\n"))
        for refused in [
            "RTP/AVP;multicast;destination=224.1.1.1;port=5000-5001", "RTP/AVP;unicast;source=evil.example;server_port=1-2",
            "RTP/AVP;unicast;server_port=1-2,RTP/AVP/TCP;interleaved=0-1", "RAW/RAW/UDP;unicast;server_port=1-2",
            "RTP/AVP;unicast;server_port=99999-2", "RTP/AVP;unicast;source=127.1;server_port=1-2",
        ] {
            var fresh = try Self.check()
            #expect(throws: ContainerError.self, "\(refused)") { _ = try fresh.take(Array("RTSP/1.0 200 OK\r\nTransport: \(refused)\r\n\r\n".utf8)) }
        }
        var tcp = try Self.check()
        let interleaved = Self.text(try tcp.take(Array("RTSP/1.0 200 OK\r\ntransport:RTP/AVP/TCP;unicast;interleaved=0-1;source=127.0.0.9\r\n\r\n".utf8)))
        #expect(interleaved.contains("Transport: RTP/AVP/TCP;unicast;interleaved=0-1\r\n"), "\(interleaved)")
    }

    @Test("a redirect is checked before anything connects there, and pointed at the relay")
    func redirects() throws {
        var check = try Self.check(allowing: "rtsp://127.0.0.2,rtsp://127.0.0.4")
        let moved = Self.text(try check.take(Array("RTSP/1.0 302 Moved\r\nCSeq: 1\r\nLocation: rtsp://127.0.0.4:9554/other?x=1\r\n\r\n".utf8)))
        #expect(moved.contains("Location: rtsp://127.0.0.1:40000/other?x=1\r\n"), "\(moved)")
        #expect(check.redirect?.host == "127.0.0.4")
        #expect(check.redirect?.port == 9554)
        for location in ["rtsp://127.0.0.3/x", "http://127.0.0.2/x", "rtsp://127.0.0.2:1:127.0.0.3/x", "file:///etc/passwd"] {
            var fresh = try Self.check()
            #expect(throws: ContainerError.self, "\(location)") {
                _ = try fresh.take(Array("RTSP/1.0 301 Moved\r\nLocation: \(location)\r\n\r\n".utf8))
            }
            #expect(fresh.redirect == nil)
        }
        // A 3xx without a Location would make the demuxer connect to an empty host.
        var bare = try Self.check()
        #expect(throws: ContainerError.self) { _ = try bare.take(Array("RTSP/1.0 302 Moved\r\n\r\n".utf8)) }
        // A Location in any other answer is dropped.
        var ok = try Self.check()
        #expect(!Self.text(try ok.take(Array("RTSP/1.0 200 OK\r\nLocation: rtsp://127.0.0.3/\r\n\r\n".utf8))).contains("Location"))
    }

    @Test("session descriptions name no other host; interleaved media passes; what the strict form cannot say is refused")
    func framing() throws {
        let sdp = "v=0\r\nc=IN IP4 0.0.0.0\r\nm=video 0 RTP/AVP 96\r\nc=IN IP4 127.0.0.2/16\r\na=rtpmap:96 H264/90000\r\n"
        var check = try Self.check()
        let media: [UInt8] = [0x24, 0, 0, 4, 1, 2, 3, 4]
        let answer = Array("RTSP/1.0 200 OK\r\nCSeq: 2\r\nContent-Length: \(sdp.utf8.count)\r\n\r\n\(sdp)".utf8)
        // In pieces: nothing comes out before a message is whole.
        #expect(try check.take(answer.prefix(10)).isEmpty)
        let out = try check.take(answer.dropFirst(10) + media)
        #expect(Self.text(out).hasSuffix(sdp + "\u{24}\u{0}\u{0}\u{4}\u{1}\u{2}\u{3}\u{4}"))
        for bad in [
            "RTSP/1.0 200 OK\r\nContent-Length: 28\r\n\r\nv=0\r\nc=IN IP4 127.0.0.3\r\nxxxx",
            "RTSP/1.0 200 OK\r\nContent-Length: 21\r\n\r\nc=IN\tIP4\t127.0.0.3\r\n\r\n",
            "RTSP/1.0 200 OK\r\n$Transport: x\r\n\r\n", "RTSP/1.0 2000 OK\r\n\r\n", "RTSP/1.0 200 OK\r\nContent-Length: -1\r\n\r\n",
            "RTSP/1.0 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "RTSP/1.0 200 OK\r\nA: b\u{0}c\r\n\r\n",
        ] {
            var fresh = try Self.check()
            #expect(throws: ContainerError.self, "\(bad.debugDescription)") { _ = try fresh.take(Array(bad.utf8)) }
        }
    }

    @Test("a session description of more streams than a camera has is refused before the demuxer sets them up")
    func tooManyStreams() throws {
        func answer(streams: Int) -> [UInt8] {
            let sdp = "v=0\r\n" + String(repeating: "m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\n", count: streams)
            return Array("RTSP/1.0 200 OK\r\nCSeq: 2\r\nContent-Length: \(sdp.utf8.count)\r\n\r\n\(sdp)".utf8)
        }
        var check = try Self.check()
        #expect(try !check.take(answer(streams: RTSPAnswerCheck.maxMediaSections)).isEmpty)
        var fresh = try Self.check()
        let error = #expect(throws: ContainerError.self) { _ = try fresh.take(answer(streams: RTSPAnswerCheck.maxMediaSections + 1)) }
        #expect(error?.code == .sourceFailed)
        #expect(error?.message.contains("more than 16 streams") == true, "\(error?.message ?? "")")
    }
}
