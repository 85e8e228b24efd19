import Foundation

/// The committed container fixtures (scripts/make-container-fixtures.sh) and their manifest:
/// each row's pictures as the ffmpeg CLI decodes that same file.
public enum ContainerFixtures {
    public static let folder = TestDataFolder.containerFixtures
    public static var directory: URL { folder.url }

    public struct Row: Sendable, CustomStringConvertible {
        public var file: String
        public var container: String
        public var codec: String
        public var frames: Int
        public var md5: String
        public var description: String { file }
    }

    public static let rows: [Row] = folder.manifest.rows.map { row in
        Row(
            file: row.file, container: row["container"] ?? "", codec: row["codec"] ?? "",
            frames: (try? row.number("frames")) ?? 0, md5: row["yuv_md5"] ?? "")
    }

    /// The rows whose video FrameTap decodes.
    public static var decodable: [Row] { rows.filter { $0.codec == "h264" || $0.codec == "h265" } }

    public static func row(_ file: String) throws -> Row {
        guard let row = rows.first(where: { $0.file == file }) else { throw TestFailure("\(file) not in the manifest") }
        return row
    }

    public static func bytes(_ file: String) throws -> [UInt8] { try folder.bytes(file) }
}
