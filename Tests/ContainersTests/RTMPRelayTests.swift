@testable import Containers
import Testing

/// What the RTMP relay sends on: the tcUrl libavformat would have sent for the source's own URL,
/// and a byte budget that a picture renews.
@Suite("RTMP through the relay", .timeLimit(.minutes(10)))
struct RTMPRelayTests {
    @Test("the tcUrl names the source's host and port and the application libavformat cuts from the path")
    func tcURL() throws {
        for (url, expected) in [
            ("rtmp://cam.example/live/stream", "rtmp://cam.example:1935/live"),
            ("rtmp://10.0.0.7:1936/live/stream?token=x", "rtmp://10.0.0.7:1936/live"),
            // An application instance, unless a playpath prefix comes first.
            ("rtmp://cam.example/app/instance/stream", "rtmp://cam.example:1935/app/instance"),
            ("rtmp://cam.example/vod/mp4:dir/file.mp4", "rtmp://cam.example:1935/vod"),
            ("rtmp://cam.example/ondemand/stream", "rtmp://cam.example:1935/ondemand"),
            ("rtmp://[::1]/live/stream", "rtmp://[::1]:1935/live"),
        ] {
            #expect(RTMPConnectURL.tcURL(of: try SourceURL(url)) == expected, "\(url)")
        }
        // Where libavformat's versions cut differently, its own stays.
        #expect(RTMPConnectURL.tcURL(of: try SourceURL("rtmp://cam.example/stream")) == nil)
        #expect(RTMPConnectURL.tcURL(of: try SourceURL("rtmp://cam.example/live/a?slist=b")) == nil)
    }

    @Test("64 MiB without a picture ends the connection; each picture starts the count again")
    func byteBudget() throws {
        let pictures = DeliveredPictures()
        var budget = RTMPByteBudget(pictures: pictures)
        let mebibyte = [UInt8](repeating: 7, count: 1 << 20)
        for _ in 0..<64 { #expect(try budget.take(mebibyte).count == mebibyte.count) }
        pictures.add()
        for _ in 0..<64 { _ = try budget.take(mebibyte) }
        #expect(throws: ContainerError.self) { _ = try budget.take([1]) }
        #expect(budget.redirect == nil)
    }
}
