@testable import Containers
import Decoding
import Foundation
import Testing
import TestSupport
import Timekeeping
import VideoCoding

@Suite("Demuxer: pushed containers through libavformat", .timeLimit(.minutes(10)))
struct DemuxerTests {
    @Test("every fixture's pictures equal the ffmpeg CLI's decode of the same file", arguments: ContainerFixtures.decodable)
    func pictureExact(row: ContainerFixtures.Row) throws {
        let bytes = try ContainerFixtures.bytes(row.file)
        let result = try DemuxedDecode.run(bytes, container: ContainerFixtures.format(of: row), pieceSize: 1000)
        #expect(result.failure == nil)
        #expect(result.errors.isEmpty, "\(result.errors)")
        #expect(result.frames.count == row.frames)
        #expect(result.rawMD5 == row.md5)
        #expect(result.descriptions.map(\.codec.rawValue) == [row.codec])
    }
}

@Suite("Demuxer: MPEG-TS keyframes larger than libavformat's PES buffer", .timeLimit(.minutes(10)))
struct LargePESTests {
    static let ffmpeg = ["/usr/bin/ffmpeg", "/usr/local/bin/ffmpeg"]
        .first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/bin/ffmpeg"

    /// A video PES that never ends (its packets go on without another start): joined up to the
    /// bound, then refused as invalid_container, not gathered for as long as it is sent.
    @Test func aPESThatNeverEndsIsRefusedAtTheBound() throws {
        let fixture = try ContainerFixtures.bytes("h264_320x240_aac.ts")
        let packets = stride(from: 0, to: fixture.count - 187, by: 188).map { Array(fixture[$0..<$0 + 188]) }
        func pid(_ packet: [UInt8]) -> Int { Int(packet[1] & 0x1F) << 8 | Int(packet[2]) }
        let start = try #require(packets.firstIndex { $0[1] & 0x40 != 0 && $0[4..<24].starts(with: [0, 0, 1, 0xE0]) })
        let video = pid(packets[start])
        var stream = packets[...start].filter { pid($0) != video || $0 == packets[start] }.flatMap { $0 }
        var counter = packets[start][3] & 0x0F
        let payload = [UInt8](repeating: 0x55, count: 184)
        while stream.count < Demuxer.maxGatheredBytes + (4 << 20) {
            counter = (counter + 1) & 0x0F
            stream += [0x47, UInt8(video >> 8), UInt8(video & 0xFF), 0x10 | counter] + payload
        }
        let result = try DemuxedDecode.run(stream, container: .mpegTS, pieceSize: 1 << 20)
        #expect(result.failure?.code == .invalidContainer, "\(String(describing: result.failure))")
        #expect(result.failure?.message.contains("64 MiB") == true)
    }

    /// 1080p with noise at a fixed quantiser: its IDR pictures are about 290 KB, so libavformat
    /// hands each on in two pieces. The pictures equal the ffmpeg CLI's decode of the same file.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: ffmpeg), "needs the ffmpeg CLI"))
    func aKeyframeHandedOnInPiecesIsDecodedWhole() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("large-pes-\(UUID().uuidString).ts")
        defer { try? FileManager.default.removeItem(at: file) }
        _ = try runProgram(Self.ffmpeg, [
            "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=25", "-frames:v", "6",
            "-vf", "noise=alls=10:allf=t", "-c:v", "libx264", "-preset", "ultrafast", "-qp", "30", "-g", "3",
            "-f", "mpegts", file.path,
        ])
        let bytes = Array(try Data(contentsOf: file))
        let reference = MD5.hex(try runProgram(Self.ffmpeg, [
            "-nostdin", "-loglevel", "error", "-flags", "unaligned", "-i", file.path,
            "-autoscale", "0", "-fps_mode", "passthrough", "-f", "rawvideo", "-",
        ]))
        let result = try DemuxedDecode.run(bytes, container: .mpegTS, pieceSize: 64 << 10)
        #expect(result.failure == nil)
        #expect(result.errors.isEmpty, "\(result.errors)")
        #expect(result.frames.count == 6 && result.samples == 6, "one sample per picture, the keyframes joined")
        #expect(result.rawMD5 == reference)
    }
}

@Suite("Demuxer: what it refuses, and bad containers", .timeLimit(.minutes(10)))
struct DemuxerRefusalTests {
    @Test("a VP8 WebM is refused as unsupported_codec naming VP8")
    func unsupportedCodec() throws {
        let result = try DemuxedDecode.run(try ContainerFixtures.bytes("vp8_176x144.webm"), container: .matroska)
        #expect(result.failure?.code == .unsupportedCodec)
        #expect(result.failure?.message.contains("vp8") == true)
        #expect(result.samples == 0)
    }

    /// The pre-Enhanced-RTMP extension some cameras and servers send: libavformat 5.1 knows no
    /// codec for it, which read as a container without video.
    @Test("H.265 under FLV's codec id 12 is refused as unsupported_codec saying so")
    func flvCodecTwelve() throws {
        var flv = try ContainerFixtures.bytes("h264_320x240.flv")
        // The FLV header, then tags after each 4-byte previous-tag size: a video tag's first data
        // byte holds its codec id in the low four bits (7, AVC).
        var offset = Int(flv[5]) << 24 | Int(flv[6]) << 16 | Int(flv[7]) << 8 | Int(flv[8])
        offset += 4
        var patched = 0
        while offset + 11 < flv.count {
            let size = Int(flv[offset + 1]) << 16 | Int(flv[offset + 2]) << 8 | Int(flv[offset + 3])
            if flv[offset] == 9, size > 0 {
                flv[offset + 11] = flv[offset + 11] & 0xF0 | 12
                patched += 1
            }
            offset += 11 + size + 4
        }
        #expect(patched > 0)
        let result = try DemuxedDecode.run(flv, container: .flv)
        #expect(result.failure?.code == .unsupportedCodec)
        #expect(result.failure?.message.contains("FLV's codec id 12") == true, "\(result.failure?.message ?? "")")
    }

    @Test("audio only is refused as no_video_track", arguments: [("audio_only.mp4", ContainerFormat.mp4), ("audio_only.ts", .mpegTS)])
    func noVideoTrack(file: String, container: ContainerFormat) throws {
        let result = try DemuxedDecode.run(try ContainerFixtures.bytes(file), container: container)
        #expect(result.failure?.code == .noVideoTrack)
        #expect(result.failure?.message.contains("audio") == true)
    }

    @Test("audio beside the video is counted and left out")
    func audioCounted() throws {
        for (file, container) in [("h264_320x240_aac.mp4", ContainerFormat.mp4), ("h264_320x240_aac.ts", .mpegTS)] {
            let result = try DemuxedDecode.run(try ContainerFixtures.bytes(file), container: container)
            #expect(result.failure == nil)
            #expect((result.ignored["audio"] ?? 0) > 0, "\(file): \(result.ignored)")
            #expect(result.frames.count == 20)
        }
    }

    @Test("an MP4 whose moov follows more media data than the seek window holds is container_needs_seeking")
    func moovBeyondWindow() throws {
        let bytes = try ContainerFixtures.bytes("h264_320x240_moov_at_end.mp4")
        let small = try DemuxedDecode.run(bytes, container: .mp4, seekWindow: 4096)
        #expect(small.failure?.code == .containerNeedsSeeking)
        #expect(small.frames.isEmpty)
        // Exactly as large as the file: everything fits, every picture decodes.
        let exact = try DemuxedDecode.run(bytes, container: .mp4, seekWindow: bytes.count)
        #expect(exact.failure == nil)
        #expect(exact.frames.count == 20)
    }

    /// A PAT and PMT whose only stream has a type libavutil has no name for (found by the
    /// container-samples fuzz target): the verdict names it "unknown" instead of crashing on the
    /// name libavutil does not give.
    @Test("bytes that are not MPEG-TS, read as MPEG-TS, are invalid_container, not a container without tracks")
    func noiseAsTransportStream() throws {
        var generator = SplitMix64(seed: 3)
        let noise = (0..<(256 << 10)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        let result = try DemuxedDecode.run(noise, container: .mpegTS)
        #expect(result.failure?.code == .invalidContainer, "\(String(describing: result.failure))")
        #expect(result.failure?.message.contains("not MPEG-TS") == true)
    }

    @Test("a track of a kind libavutil cannot name is no_video_track, not a crash")
    func unnamedTrackKind() throws {
        let encoded = """
            BUdAABAAALANAAHBAAAAAfAAKrEEsv//////////////////////////////////////////////////////////////////
            //////////////////////////9BTP//////////////////////////////////////////////////////////////////
            ////////////////////////////////////////////////////////////R1AAEAACsB0AAcEAAOEA8AAAAAAAAf//////
            ////eSx5AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAKwHQABwQAA4QDwAAAAAAAAAAAAAAAAAAAAAABmb3JtYXRf
            d2hpdGVsaQAAAAAAAAAAAAAAAABsAm1lcmdlX3BtdF8AAAAAAAD/////////YXV0b////////kJiVG188ODMZO9X8+jDN4hw
            4/EMMI5NSy4yN4H9L6lCscg=
            """
        let body = try #require(Data(base64Encoded: encoded, options: .ignoreUnknownCharacters))
        let result = try DemuxedDecode.run([UInt8](body), container: .mpegTS, pieceSize: 1)
        #expect(result.frames.isEmpty)
        #expect(result.failure?.code == .noVideoTrack, "\(String(describing: result.failure))")
    }

    @Test("an MPEG-TS whose second PMT merges a PID into a stream closes without freeing a PES context twice")
    func mergedPMTStreamClosesCleanly() throws {
        // Found by `make fuzz` (container-samples, minimized): libavformat 5.1 freed the merged
        // stream's PES context with its filter and again as the stream's priv_data, an abort.
        let encoded = """
            /////////////////0dAABAAALANAAHBAAAAAfAAKrEEsv//////////////////////////////////////////////////
            ////////////////////////////////////////////////////////////////////////////////////////////////
            ////////////////////////////////////////////////////////////////////////////R1AAEAACsB0AAcEAAOEA
            8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABuRQ/gqhUYmu8F2Ru+MpLgNMjcu
            MTCY////////////////c09TRPztZFyRQ/gqhUYmu8F2Ru+MpLgN4zkuMjcuMTCYdkbvjKS4DePjOS4yNy4xMJj/////////
            //////////////////////////////////////9HUAARAAKwHQABwQAA4QDwABvhAMTginMfWo2htx85Rj6/qUXoWfp//+Tr
            khzH/cu7tD40yuQH1q4YpWreBi16Nosp+Awhs4Beip2BJbDOrhJ59IsjKs2bGKhNg/vqu+FBdNl+llAlQqkp9ehIMAabRw/B
            1dv/3TWWiojmGG42NYi3n9AYaniutz8j2r0fVqGKhtCbAtFZz7//InNPU0T87WRckUP4KoVGJrvBdkbvjKS4DeM5LjI3LjEw
            mA==
            """
        let body = try #require(Data(base64Encoded: encoded, options: .ignoreUnknownCharacters))
        for pieceSize in [1000, 188, 1] {
            let result = try DemuxedDecode.run([UInt8](body), container: .mpegTS, pieceSize: pieceSize)
            #expect(result.frames.isEmpty)
        }
    }

    @Test("a live container keeps only the bytes after its last packet, whatever the window")
    func windowStaysSmall() throws {
        let bytes = try ContainerFixtures.bytes("h264_320x240_fragmented.mp4")
        let input = InMemoryInput(bytes, pieceSize: 512)
        let demuxer = try Demuxer(container: .mp4, input: input, seekWindow: 32 << 20, interrupt: DemuxInterrupt(clock: SystemClock()))
        var most = 0
        while case .sample = demuxer.next() { most = max(most, demuxer.heldBytes) }
        #expect(most < 8192, "held \(most) bytes")
    }

    @Test("truncated containers end with invalid_container or fewer pictures, never a crash", arguments: ContainerFixtures.decodable)
    func truncated(row: ContainerFixtures.Row) throws {
        let bytes = try ContainerFixtures.bytes(row.file)
        for cut in [16, 100, 700, bytes.count / 3, bytes.count / 2, bytes.count - 10] {
            let result = try DemuxedDecode.run(Array(bytes.prefix(cut)), container: ContainerFixtures.format(of: row))
            #expect(result.frames.count <= row.frames)
            if let failure = result.failure {
                #expect([.invalidContainer, .noVideoTrack, .containerNeedsSeeking].contains(failure.code), "\(cut): \(failure)")
            }
        }
        // A moov cut short (the header never completes) is refused before any picture.
        if row.file == "h264_320x240.mp4" {
            let result = try DemuxedDecode.run(Array(bytes.prefix(600)), container: .mp4)
            #expect(result.failure?.code == .invalidContainer)
        }
    }

    @Test("an mdat that declares 4 GB and a body that ends: invalid_container, memory bounded by the window")
    func hugeMdat() throws {
        var bytes: [UInt8] = [0, 0, 0, 24] + Array("ftypisom".utf8) + [0, 0, 2, 0] + Array("isomiso2".utf8)
        // mdat with a 64-bit size of 4 GiB, then 1 MB of it.
        bytes += [0, 0, 0, 1] + Array("mdat".utf8) + [0, 0, 0, 1, 0, 0, 0, 0]
        bytes += [UInt8](repeating: 0xAB, count: 1 << 20)
        let input = InMemoryInput(bytes, pieceSize: 65536)
        do {
            _ = try Demuxer(container: .mp4, input: input, seekWindow: 256 << 10, interrupt: DemuxInterrupt(clock: SystemClock()))
            Issue.record("opened an MP4 without a moov")
        } catch {
            #expect(error.code == .invalidContainer)
        }
    }

    @Test("sample sizes that run past the body: the pictures before decode, the rest are errors")
    func samplesPastTheBody() throws {
        // Faststart: the moov's sample table describes all 20 samples, the mdat holds 60 % of them.
        let bytes = try ContainerFixtures.bytes("h264_320x240.mp4")
        let result = try DemuxedDecode.run(Array(bytes.prefix(bytes.count * 6 / 10)), container: .mp4)
        #expect(result.frames.count > 0)
        #expect(result.frames.count < 20)
    }

    @Test("MPEG-TS with continuity errors decodes on; a PID change mid-stream keeps the video")
    func mpegTSDamage() throws {
        var bytes = try ContainerFixtures.bytes("h264_320x240_aac.ts")
        // Flip the continuity counter of every 7th packet: the demuxer drops or marks what it
        // lost and carries on.
        var damaged = 0
        for packet in stride(from: 0, to: bytes.count - 188, by: 188 * 7) where bytes[packet] == 0x47 {
            bytes[packet + 3] ^= 0x05
            damaged += 1
        }
        #expect(damaged > 10)
        let result = try DemuxedDecode.run(bytes, container: .mpegTS)
        #expect(result.failure == nil)
        #expect(result.frames.count > 5)
        let change = try DemuxedDecode.run(try ContainerFixtures.bytes("h264_320x240_pid_change.ts"), container: .mpegTS)
        let row = try #require(ContainerFixtures.rows.first { $0.file == "h264_320x240_pid_change.ts" })
        #expect(change.frames.count == row.frames)
        #expect(change.rawMD5 == row.md5)
    }
}

@Suite("Sniffer: containers told from Annex B by their first bytes", .timeLimit(.minutes(10)))
struct SnifferTests {
    @Test("each fixture is recognised; Annex B and garbage are not containers")
    func sniffing() throws {
        for row in ContainerFixtures.rows {
            let bytes = try ContainerFixtures.bytes(row.file)
            #expect(Sniffer.sniff(bytes[...], complete: true) == .container(ContainerFixtures.format(of: row)), "\(row.file)")
            #expect(Sniffer.sniff(bytes.prefix(Sniffer.decisiveLength), complete: false) == .container(ContainerFixtures.format(of: row)))
        }
        #expect(Sniffer.sniff([0, 0, 0, 1, 0x67, 0x64][...], complete: false) == .elementaryStream)
        #expect(Sniffer.sniff([0, 0, 1][...], complete: false) == .elementaryStream)
        #expect(Sniffer.sniff([0x47, 1, 2][...], complete: false) == .needMoreBytes)
        // Bytes without a start code could still be MPEG-TS cut inside a packet until 752 are in.
        #expect(Sniffer.sniff(Array("hello, world".utf8)[...], complete: false) == .needMoreBytes)
        #expect(Sniffer.sniff(Array("hello, world".utf8)[...], complete: true) == .elementaryStream)
        #expect(Sniffer.sniff(Array(repeating: UInt8(ascii: "x"), count: Sniffer.decisiveLength)[...], complete: false) == .elementaryStream)
        #expect(Sniffer.sniff([][...], complete: true) == .elementaryStream)
    }

    @Test("MPEG-TS cut inside a packet is MPEG-TS; Annex B cut anywhere is not")
    func cutInsideAPacket() throws {
        for file in ["h264_320x240_aac.ts", "h265_176x144.ts", "h264_320x240_pid_change.ts"] {
            let bytes = try ContainerFixtures.bytes(file)
            for cut in [1, 100, 187, 188 * 7 + 50] {
                let rest = bytes.dropFirst(cut)
                #expect(Sniffer.sniff(rest.prefix(Sniffer.decisiveLength), complete: false) == .container(.mpegTS), "\(file) from \(cut)")
                #expect(Sniffer.sniff(rest.prefix(Sniffer.decisiveLength - 1), complete: false) != .elementaryStream, "\(file) from \(cut)")
            }
        }
        let annexB = try ["baseline_176x144.264", "high_320x240.264", "main_bframes_176x144.265"].map { try Fixtures.bytes($0) }
        for bytes in annexB {
            for cut in stride(from: 1, to: min(bytes.count - 1000, 40_000), by: 97) {
                let rest = bytes.dropFirst(cut)
                #expect(Sniffer.sniff(rest.prefix(Sniffer.decisiveLength), complete: false) == .elementaryStream, "from \(cut)")
            }
        }
        // Cut where a payload byte is 0x47: not a packet's start, still MPEG-TS.
        let ts = try ContainerFixtures.bytes("h264_320x240_aac.ts")
        let payload47 = try #require((1..<2000).first { ts[$0] == 0x47 && $0 % 188 != 0 })
        #expect(Sniffer.sniff(ts.dropFirst(payload47).prefix(Sniffer.decisiveLength), complete: false) == .container(.mpegTS))
        // Too short to tell: a push that ends there is Annex B (its own path reports garbage).
        let short = try ContainerFixtures.bytes("h264_320x240_aac.ts").dropFirst(100).prefix(400)
        #expect(Sniffer.sniff(short, complete: false) == .needMoreBytes)
        #expect(Sniffer.sniff(short, complete: true) == .elementaryStream)
    }

    @Test("media types name their container; others name none")
    func mediaTypes() {
        #expect(ContainerFormat(mediaType: "video/MP2T") == .mpegTS)
        #expect(ContainerFormat(mediaType: "video/mp4; codecs=\"avc1.64001f\"") == .mp4)
        #expect(ContainerFormat(mediaType: "video/iso.segment") == .mp4)
        #expect(ContainerFormat(mediaType: " video/webm ;codecs=h264") == .matroska)
        #expect(ContainerFormat(mediaType: "video/x-matroska") == .matroska)
        #expect(ContainerFormat(mediaType: "video/x-flv") == .flv)
        #expect(ContainerFormat(mediaType: "video/H264") == nil)
        #expect(ContainerFormat(mediaType: "application/octet-stream") == nil)
    }
}
