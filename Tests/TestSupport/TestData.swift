import Foundation

/// A folder of test streams, read in place: the project's fixtures (committed, made by
/// scripts/make-fixtures.sh and scripts/make-container-fixtures.sh) or the shared conformance
/// corpora beside the checkout (not in the repository; tests that need them are skipped when
/// they are absent).
public struct TestDataFolder: Sendable {
    public let url: URL

    public init(_ url: URL) { self.url = url.standardizedFileURL }

    /// Tests/Fixtures.
    public static let fixtures = TestDataFolder(testsFolder.appendingPathComponent("Fixtures"))
    /// Tests/Fixtures/Containers.
    public static let containerFixtures = TestDataFolder(fixtures.url.appendingPathComponent("Containers"))
    /// ../shared/testdata/h264 (JVT and openh264 conformance streams).
    public static let sharedH264 = TestDataFolder(sharedTestData.appendingPathComponent("h264"))
    /// ../shared/testdata/h265 (cros-codecs conformance streams).
    public static let sharedH265 = TestDataFolder(sharedTestData.appendingPathComponent("h265"))

    /// This file's folder's parent: Tests/.
    private static let testsFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    /// The shared test data of the checkouts beside this one.
    private static let sharedTestData = testsFolder.appendingPathComponent("../../shared/testdata")

    public var isPresent: Bool { FileManager.default.fileExists(atPath: url.path) }

    public func url(_ name: String) -> URL { url.appendingPathComponent(name) }

    /// The file's bytes; throws `TestFailure` naming the file when it cannot be read.
    public func bytes(_ name: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: url(name).path) else {
            throw TestFailure("cannot read \(name) in \(url.path)")
        }
        return Array(data)
    }

    /// The names of the files whose names end with `suffix`, sorted; none when the folder is absent.
    public func names(endingWith suffix: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).filter { $0.hasSuffix(suffix) }.sorted()
    }

    /// The folder's MANIFEST.tsv; empty when the folder or its manifest is absent.
    public var manifest: Manifest {
        (try? Manifest(contentsOf: url("MANIFEST.tsv"))) ?? Manifest(parsing: "")
    }
}

/// A MANIFEST.tsv: a header row naming the columns, then one row per file, fields separated by
/// tabs. Columns differ between corpora (`yuv_md5` here, `md5_whole_yuv420p` in the shared H.265
/// one), so rows are read by column name.
public struct Manifest: Sendable {
    public struct Row: Sendable {
        private let columns: [String: Int]
        private let fields: [String]

        fileprivate init(columns: [String: Int], fields: [String]) {
            self.columns = columns
            self.fields = fields
        }

        /// The first column: the file the row describes.
        public var file: String { fields.first ?? "" }

        /// The field in `column`; nil when there is no such column or the row stops short of it.
        public subscript(column: String) -> String? {
            guard let index = columns[column], index < fields.count else { return nil }
            return fields[index]
        }

        /// The field in `column`, which must be there and not empty.
        public func text(_ column: String) throws -> String {
            guard let value = self[column], !value.isEmpty else { throw TestFailure("\(file): no \(column) in the manifest") }
            return value
        }

        /// The field in `column` as a number.
        public func number(_ column: String) throws -> Int {
            guard let value = Int(try text(column)) else { throw TestFailure("\(file): \(column) is not a number") }
            return value
        }
    }

    public let columns: [String]
    public let rows: [Row]

    public init(parsing text: String) {
        let lines = text.split(separator: "\n").map {
            $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        }
        columns = lines.first ?? []
        let indices = Dictionary(columns.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        rows = lines.dropFirst().filter { !($0.first ?? "").isEmpty }.map { Row(columns: indices, fields: $0) }
    }

    public init(contentsOf url: URL) throws {
        self.init(parsing: try String(contentsOf: url, encoding: .utf8))
    }

    /// The row of `file`; throws `TestFailure` when the manifest has none.
    public func row(_ file: String) throws -> Row {
        guard let row = rows.first(where: { $0.file == file }) else { throw TestFailure("\(file) not in the manifest") }
        return row
    }
}

/// The committed stream fixtures (Tests/Fixtures) and their manifest: size, picture count and
/// the MD5 of the reference decoder's raw pictures, for each file.
public enum Fixtures {
    public static let folder = TestDataFolder.fixtures
    public static var directory: URL { folder.url }
    public static let manifest = folder.manifest

    public struct Entry: Sendable {
        public let file: String
        public let width: Int
        public let height: Int
        public let frames: Int
        public let yuvMD5: String
        /// The reference decoder's name (yuvj420p for full range).
        public let pixelFormat: String?
    }

    public static func url(_ name: String) -> URL { folder.url(name) }
    public static func bytes(_ name: String) throws -> [UInt8] { try folder.bytes(name) }

    /// The manifest's row of `name`; throws `TestFailure` when it has none.
    public static func entry(_ name: String) throws -> Entry {
        let row = try manifest.row(name)
        return Entry(
            file: name, width: try row.number("width"), height: try row.number("height"), frames: try row.number("frames"),
            yuvMD5: try row.text("yuv_md5"), pixelFormat: row["pix_fmt"])
    }
}
