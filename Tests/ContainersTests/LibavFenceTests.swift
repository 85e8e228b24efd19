@testable import Containers
import Foundation
import Testing
import TestSupport
import Timekeeping

/// Every `avformat_open_input` is fenced: the protocols it may open and the one demuxer it uses.
@Suite("LibavFence: what libavformat may reach", .timeLimit(.minutes(10)))
struct LibavFenceTests {
    static func open(_ url: String, _ fence: LibavFence) -> ContainerError? {
        do {
            _ = try Demuxer(url: url, fence: fence, options: [:], interrupt: DemuxInterrupt(clock: SystemClock()))
            return nil
        } catch {
            return error
        }
    }

    @Test("no protocol at all unless named; a named demuxer is the only one, nothing is probed")
    func fence() throws {
        let fixture = ContainerFixtures.directory.appendingPathComponent("h264_320x240_aac.ts").path
        #expect(Self.open("file:\(fixture)", LibavFence(protocols: ["file"], demuxer: "mpegts")) == nil)
        // The input FrameTap's own I/O reads (pushes, HTTP bodies) opens no protocol.
        #expect(Self.open("file:\(fixture)", .ownInput(.mpegTS)) != nil)
        #expect(Self.open("file:\(fixture)", LibavFence(protocols: ["srt"], demuxer: "mpegts")) != nil)
        // A playlist is read by the named demuxer, never handed to hls.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("frametap-fence-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let playlist = directory.appendingPathComponent("list.m3u8")
        try Data("#EXTM3U\n#EXTINF:1,\nfile://\(fixture)\n#EXT-X-ENDLIST\n".utf8).write(to: playlist)
        #expect(Self.open("file:\(playlist.path)", LibavFence(protocols: ["file"], demuxer: "mpegts")) != nil)
    }

    @Test("each scheme's row: its protocols, its demuxer, and no scheme reaches a playlist, a file or a concatenation")
    func rows() {
        for scheme in PullScheme.all {
            guard case .libavformat(let opening) = scheme.opening else { continue }
            let fence = opening.fence
            for forbidden in ["file", "hls", "http", "https", "concat", "subfile", "data", "crypto", "pipe"] {
                #expect(!fence.protocols.contains(forbidden), "\(scheme.name): \(forbidden)")
            }
            #expect(!["hls", "dash", "concat", "ffconcat", "image2"].contains(fence.demuxer))
        }
        #expect(PullScheme(named: "RTSP")?.defaultPort == 554)
        #expect(PullScheme(named: "ftp") == nil)
    }
}
