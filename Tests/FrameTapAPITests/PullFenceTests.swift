import Containers
import Foundation
import Sessions
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Pulls cannot reach what `--allow-sources` forbids (issue 25, H1-H3), and credentials in a
/// URL's path stay hidden (H5): real clients and fake servers on several loopback addresses.
/// The allowed source is always on 127.0.0.2; a canary listens on the forbidden 127.0.0.3 and
/// must see nothing.
@Suite("Pulls fenced in: the allow list holds for every address a source leads to", .timeLimit(.minutes(10)))
struct PullFenceTests {
    static func configure(_ allowed: String) -> (inout ServerConfiguration) -> Void {
        PullSourceTests.configure(allowed)
    }

    static func put(_ port: UInt16, _ id: String, _ url: String, transport: String? = nil) throws -> TestResponse {
        try PullSourceTests.pull(port, id, from: url, transport: transport)
    }

    static func lastError(_ port: UInt16, _ id: String) -> [String: Any]? { PullSourceTests.lastError(port, id) }

    @Test("H1: a host with extra colons is refused before any connection, for every scheme")
    func colonInHost() throws {
        let canary = try SourceServer(host: "127.0.0.3") { _ in .silent }
        let udpCanary = try UDPCanary(host: "127.0.0.3")
        try withService(sessions: Self.configure("rtsp://*.example.com,rtmp://*.example.com,srt://*.example.com")) { service in
            for url in [
                "rtsp://127.0.0.3:\(canary.port):cam.example.com:554/x", "rtmp://127.0.0.3:\(canary.port):cam.example.com/live/x",
                "srt://127.0.0.3:\(udpCanary.port):cam.example.com:9000", "rtsp://cam.example.com:554:\(canary.port)/x",
                "rtsp://127.0.0.3:\(canary.port)@cam.example.com:x:554/x",
            ] {
                let response = try Self.put(service.port, "colon", url)
                #expect(response.problem == Problem(400, "invalid_source"), "\(url): \(response.text.prefix(300))")
            }
            #expect(try request(service.port, "GET", "/sessions/colon").status == 404)
            Thread.sleep(forTimeInterval: 1.5)
        }
        #expect(canary.accepted == 0)
        #expect(udpCanary.received == 0)
    }

    @Test("H2: an allowed SRT source is read as MPEG-TS only: an HLS playlist it sends is never followed")
    func srtServesAPlaylist() throws {
        let canary = try SourceServer(host: "127.0.0.3") { _ in .serve(try! ContainerFixtures.bytes("h264_320x240_aac.ts"), contentType: "video/mp2t") }
        let localFile = ContainerFixtures.directory.appendingPathComponent("h264_320x240_aac.ts").path
        let playlist =
            "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXTINF:1,\n\(canary.url("/seg0.ts"))\n"
            + "#EXTINF:1,\nfile://\(localFile)\n#EXT-X-ENDLIST\n"
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("frametap-srt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let playlistFile = directory.appendingPathComponent("live.m3u8")
        try Data(playlist.utf8).write(to: playlistFile)
        let port = try freeUDPPort(on: "127.0.0.2")
        // An SRT listener that sends the playlist to whoever calls (ffmpeg, as in the attack).
        let sender = Process()
        sender.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        sender.arguments = [
            "-nostdin", "-hide_banner", "-loglevel", "error", "-f", "data", "-i", playlistFile.path, "-map", "0", "-c", "copy",
            "-f", "data", "srt://127.0.0.2:\(port)?mode=listener&linger=3",
        ]
        sender.standardOutput = FileHandle.nullDevice
        sender.standardError = FileHandle.nullDevice
        try sender.run()
        defer {
            if sender.isRunning { sender.terminate() }
            try? sender.waitForExit("the SRT sender to end after SIGTERM", timeout: .seconds(10))
        }
        try withService(sessions: Self.configure("srt://127.0.0.2")) { service in
            let created = try Self.put(service.port, "srt", "srt://127.0.0.2:\(port)/live.m3u8")
            #expect(created.status == 201, "\(created.text.prefix(300))")
            #expect(eventually(timeout: .seconds(10)) { Self.lastError(service.port, "srt") != nil })
            let source = try PullSourceTests.source(service.port, "srt")
            #expect(source["format"] as? String != "hls", "\(source)")
            Thread.sleep(forTimeInterval: 1)
            #expect(try PullSourceTests.framesDecoded(service.port, "srt") == 0)
            #expect(try request(service.port, "GET", "/sessions/srt/frame/latest.jpg").status != 200)
        }
        #expect(canary.accepted == 0)
    }

    @Test("H3: a SETUP answer naming another host as the media source over UDP is refused; nothing is sent there")
    func setupSourceElsewhere() throws {
        let canary = try UDPCanary(host: "127.0.0.3")
        let camera = try SourceServer(host: "127.0.0.2") { _ in
            .rtsp(rtspCamera { clients in
                "RTP/AVP;unicast;client_port=\(clients);server_port=\(canary.port)-\(canary.port + 1);source=127.0.0.3"
            })
        }
        try withService(sessions: Self.configure("rtsp://127.0.0.2")) { service in
            let created = try Self.put(service.port, "cam", "rtsp://127.0.0.2:\(camera.port)/cam", transport: "udp")
            #expect(created.status == 201)
            #expect(PullSourceTests.fails(service.port, "cam", with: "source_not_allowed"))
            let message = Self.lastError(service.port, "cam")?["message"] as? String ?? ""
            #expect(message.contains("127.0.0.3"), "\(message)")
            // Another attempt or two, as the back-off allows.
            #expect(eventually(timeout: .seconds(6)) { camera.accepted >= 2 })
        }
        #expect(canary.received == 0)
    }

    @Test("H3: over UDP, media and RTCP go to the camera's own address, also when its answer names none")
    func setupSourceOwn() throws {
        let media = try UDPCanary(host: "127.0.0.2")
        let camera = try SourceServer(host: "127.0.0.2") { _ in .rtsp(rtspCamera(mediaFrom: media)) }
        try withService(sessions: Self.configure("rtsp://127.0.0.2")) { service in
            let created = try Self.put(service.port, "cam", "rtsp://127.0.0.2:\(camera.port)/cam", transport: "udp")
            #expect(created.status == 201)
            // libavformat opens the ports with a packet to each when it starts playing: those may
            // arrive before its PLAY does.
            #expect(eventually(timeout: .seconds(8)) { media.received >= 2 })
            #expect(eventually(timeout: .seconds(8)) { camera.requests.contains { $0.hasPrefix("PLAY") } }, "\(camera.requests)")
        }
    }

    @Test("an RTSP camera whose RTP packets all carry one timestamp is cut off at 64 MiB for one picture")
    func oneTimestampForEver() throws {
        // Single-NAL-unit packets of a non-IDR slice, interleaved on channel 0, all at time 1000.
        let payload: [UInt8] = [0x41] + [UInt8](repeating: 0x9A, count: 1_399)
        let sequence = Mutex<UInt16>(0)
        let camera = try SourceServer(host: "127.0.0.2") { _ in
            .rtspStreaming(rtspCamera { _ in "RTP/AVP/TCP;unicast;interleaved=0-1" }) {
                // 1,000 packets (1.4 MB) a send.
                let first = sequence.withLock { number -> UInt16 in
                    defer { number &+= 1_000 }
                    return number
                }
                var frames: [UInt8] = []
                frames.reserveCapacity(1_000 * (16 + payload.count))
                for offset in 0..<UInt16(1_000) {
                    let number = first &+ offset
                    frames += [0x24, 0, UInt8((12 + payload.count) >> 8), UInt8((12 + payload.count) & 0xFF)]
                    frames += [0x80, 96, UInt8(number >> 8), UInt8(number & 0xFF), 0, 0, 0x03, 0xE8, 0, 0, 0, 1]
                    frames += payload
                }
                return frames
            }
        }
        // The read timeout ends a read that gives no picture: long enough here for 64 MiB to arrive.
        try withService(sessions: PullSourceTests.configure("rtsp://127.0.0.2") { $0.sourceReadTimeout = .seconds(30) }) { service in
            let created = try Self.put(service.port, "cam", "rtsp://127.0.0.2:\(camera.port)/cam", transport: "tcp")
            #expect(created.status == 201)
            #expect(eventually(timeout: .seconds(30)) { Self.lastError(service.port, "cam")?["code"] as? String == "source_failed" })
            let message = Self.lastError(service.port, "cam")?["message"] as? String ?? ""
            #expect(message.contains("more than 64 MiB for one picture"), "\(message)")
        }
    }

    /// An RTMP server that starts a 16 MiB message on chunk stream after chunk stream and ends
    /// none: libavformat's RTMP protocol would gather them all (gigabytes in seconds). FrameTap's
    /// relay ends the connection at 64 MiB without a picture.
    @Test("an RTMP server that never ends a message is cut off at 64 MiB")
    func rtmpMessagesThatNeverEnd() throws {
        let server = try SourceServer(host: "127.0.0.2") { connection in
            func receive(_ count: Int) -> [UInt8]? { SourceServerCore.receive(connection, exactly: count) }
            func send(_ bytes: [UInt8]) -> Bool { SourceServerCore.sendAll(connection, bytes) }
            // The handshake: C0 C1 in, S0 S1 (version 0: no digest) S2 out, C2 in.
            guard let c0c1 = receive(1 + 1536) else { return }
            guard send([3] + [UInt8](repeating: 0, count: 1536) + Array(c0c1.dropFirst())), receive(1536) != nil else { return }
            // Chunks of 1 MiB from here on, then on chunk stream after chunk stream a video message
            // of 16 MiB - 1 whose first chunk only ever comes.
            let chunkSize = 1 << 20
            guard send([0x02, 0, 0, 0, 0, 0, 4, 0x01, 0, 0, 0, 0] + [0x00, 0x10, 0x00, 0x00]) else { return }
            let filler = [UInt8](repeating: 0x17, count: chunkSize)
            // 100 MiB, chunk streams 3 to 102 (from 64 on, named in a second byte).
            for stream in 3..<103 {
                let basic: [UInt8] = stream < 64 ? [UInt8(stream)] : [0, UInt8(stream - 64)]
                guard send(basic + [0, 0, 0, 0xFF, 0xFF, 0xFF, 0x09, 1, 0, 0, 0] + filler) else { return }
            }
        }
        try withService(sessions: PullSourceTests.configure("rtmp://127.0.0.2") { $0.sourceReadTimeout = .seconds(30) }) { service in
            let created = try Self.put(service.port, "cam", "rtmp://127.0.0.2:\(server.port)/live/cam")
            #expect(created.status == 201)
            #expect(eventually(timeout: .seconds(30)) { Self.lastError(service.port, "cam")?["code"] as? String == "source_failed" })
            let message = Self.lastError(service.port, "cam")?["message"] as? String ?? ""
            #expect(message.contains("more than 64 MiB without a whole picture"), "\(message)")
        }
    }

    @Test("H3: an RTSP redirect to a forbidden host is refused before any connection is made there")
    func redirectNeverConnects() throws {
        let canary = try SourceServer(host: "127.0.0.3") { _ in .silent }
        let camera = try SourceServer(host: "127.0.0.2") { _ in .rtspRedirect("rtsp://127.0.0.3:\(canary.port)/cam") }
        try withService(sessions: Self.configure("rtsp://127.0.0.2")) { service in
            let created = try Self.put(service.port, "cam", "rtsp://127.0.0.2:\(camera.port)/cam")
            #expect(created.status == 201)
            #expect(PullSourceTests.fails(service.port, "cam", with: "source_not_allowed"))
            #expect(eventually(timeout: .seconds(6)) { camera.accepted >= 2 })
        }
        #expect(canary.accepted == 0)
    }

    @Test("H3: an allowed RTSP redirect is followed, through the relay")
    func redirectFollowed() throws {
        let media = try UDPCanary(host: "127.0.0.3")
        let target = try SourceServer(host: "127.0.0.3") { _ in .rtsp(rtspCamera(mediaFrom: media)) }
        let camera = try SourceServer(host: "127.0.0.2") { _ in .rtspRedirect("rtsp://127.0.0.3:\(target.port)/moved") }
        try withService(sessions: Self.configure("rtsp://127.0.0.2,rtsp://127.0.0.3")) { service in
            let created = try Self.put(service.port, "cam", "rtsp://127.0.0.2:\(camera.port)/cam", transport: "udp")
            #expect(created.status == 201)
            #expect(eventually(timeout: .seconds(8)) { target.requests.contains { $0.hasPrefix("PLAY") } }, "\(target.requests)")
            #expect(eventually(timeout: .seconds(8)) { media.received >= 2 })
        }
        // The target was asked for the redirect's path.
        #expect(target.requests.first?.hasSuffix("/moved") == true, "\(target.requests)")
    }

    @Test("H5: credentials in a URL's path, query and ; parameters are never shown or logged")
    func pathCredentials() throws {
        let camera = try SourceServer(host: "127.0.0.2") { _ in .silent }
        let logs = LogLines()
        try withService(sessions: Self.configure("rtsp://127.0.0.2"), logger: logs.logger) { service in
            let events = try RawClient(port: service.port)
            try events.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
            let urls = [
                "rtsp://127.0.0.2:\(camera.port)/user=admin&password=s3cretA&channel=1&stream=0.sdp",
                "rtsp://127.0.0.2:\(camera.port)/user=admin_password=s3cretB_channel=1_stream=0.sdp?real_stream",
                "rtsp://127.0.0.2:\(camera.port)/live;password=s3cretC;jsessionid=s3cretD",
                "rtsp://127.0.0.2:\(camera.port)/cam/realmonitor?channel=1&subtype=0&authbasic=s3cretE",
            ]
            var answers: [String] = []
            for (index, url) in urls.enumerated() {
                let created = try Self.put(service.port, "cam\(index)", url)
                #expect(created.status == 201)
                answers.append(created.text)
            }
            #expect(eventually(timeout: .seconds(8)) { (0..<urls.count).allSatisfy { Self.lastError(service.port, "cam\($0)") != nil } })
            let stream = String(
                decoding: events.read(until: { String(decoding: $0, as: UTF8.self).components(separatedBy: "source.lost").count > urls.count }),
                as: UTF8.self)
            #expect(stream.contains("source.lost"))
            let shown = try (0..<urls.count).map { try request(service.port, "GET", "/sessions/cam\($0)").text }
            let list = try request(service.port, "GET", "/sessions").text
            let metrics = try request(service.port, "GET", "/metrics").text
            #expect(list.contains("password=***&channel=1"))
            #expect(list.contains("password=***_channel=1_stream=0.sdp"))
            for text in answers + shown + [list, stream, metrics, logs.all.joined(separator: "\n")] {
                #expect(!text.contains("s3cret"), "\(text.prefix(2000))")
            }
            #expect(!logs.all.isEmpty)
        }
    }
}

/// A UDP port nothing uses on `host` right now.
func freeUDPPort(on host: String) throws -> UInt16 {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    defer { close(socket) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr(host)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw TestFailure("cannot bind a UDP socket on \(host)") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
    }
    return UInt16(bigEndian: address.sin_port)
}
