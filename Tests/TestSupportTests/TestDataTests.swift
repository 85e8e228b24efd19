import Foundation
import Testing
import TestSupport

/// One reader for every MANIFEST.tsv, one loader for the fixtures and the shared corpora.
@Suite(.timeLimit(.minutes(10))) struct TestDataTests {
    @Test func aManifestIsReadByColumnName() throws {
        let manifest = Manifest(parsing: "file\tframes\tyuv_md5\n\na.264\t20\tabc\nb.264\t\nc.264\t7\tdef\textra\n")
        #expect(manifest.columns == ["file", "frames", "yuv_md5"])
        #expect(manifest.rows.map(\.file) == ["a.264", "b.264", "c.264"])
        let a = try manifest.row("a.264")
        #expect(try a.number("frames") == 20)
        #expect(a["yuv_md5"] == "abc")
        #expect(a["width"] == nil)
        let b = try manifest.row("b.264")
        #expect(b["yuv_md5"] == nil)
        #expect { try b.number("frames") } throws: { "\($0)" == "b.264: no frames in the manifest" }
        #expect { try manifest.row("d.264") } throws: { "\($0)" == "d.264 not in the manifest" }
    }

    @Test func theFixturesAndTheirManifestAreFound() throws {
        let entry = try Fixtures.entry("baseline_176x144.264")
        #expect(entry.width == 176 && entry.height == 144 && entry.frames == 20)
        #expect(entry.pixelFormat == "yuv420p")
        let bytes = try Fixtures.bytes("baseline_176x144.264")
        #expect(Array(bytes.prefix(4)) == [0, 0, 0, 1])
        #expect(Fixtures.manifest.rows.count == TestDataFolder.fixtures.names(endingWith: ".264").count
            + TestDataFolder.fixtures.names(endingWith: ".265").count)
        #expect(!ContainerFixtures.decodable.isEmpty)
        #expect(try ContainerFixtures.bytes(ContainerFixtures.rows[0].file).count > 0)
    }

    @Test func aMissingFileIsNamed() {
        #expect { try Fixtures.bytes("nothing.264") } throws: { "\($0)".hasPrefix("cannot read nothing.264 in ") }
        let absent = TestDataFolder(URL(fileURLWithPath: "/nonexistent/testdata"))
        #expect(!absent.isPresent)
        #expect(absent.names(endingWith: ".264").isEmpty)
        #expect(absent.manifest.rows.isEmpty)
    }

    @Test(.enabled(if: TestDataFolder.sharedH264.isPresent, "../shared/testdata/h264 is not present"))
    func theSharedCorporaAreFoundBesideTheCheckout() throws {
        let manifest = TestDataFolder.sharedH264.manifest
        let first = try #require(manifest.rows.first)
        #expect(try TestDataFolder.sharedH264.bytes(first.file).count > 0)
        #expect(try first.number("frames") > 0)
    }
}
