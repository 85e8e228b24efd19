import Foundation

/// The committed container fixtures (scripts/make-container-fixtures.sh) and their manifest:
/// each row's pictures as the ffmpeg CLI decodes that same file.
public enum ContainerFixtures {
    public static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Fixtures/Containers").standardizedFileURL

    public struct Row: Sendable, CustomStringConvertible {
        public var file: String
        public var container: String
        public var codec: String
        public var frames: Int
        public var md5: String
        public var description: String { file }
    }

    public static let rows: [Row] = {
        guard let text = try? String(contentsOf: directory.appendingPathComponent("MANIFEST.tsv"), encoding: .utf8) else { return [] }
        return text.split(separator: "\n").dropFirst().map { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            return Row(file: fields[0], container: fields[1], codec: fields[2], frames: Int(fields[5]) ?? 0, md5: fields[6])
        }
    }()

    /// The rows whose video FrameTap decodes.
    public static var decodable: [Row] { rows.filter { $0.codec == "h264" || $0.codec == "h265" } }

    public static func row(_ file: String) throws -> Row {
        guard let row = rows.first(where: { $0.file == file }) else { throw TestFailure("\(file) not in the manifest") }
        return row
    }

    public static func bytes(_ file: String) throws -> [UInt8] {
        Array(try Data(contentsOf: directory.appendingPathComponent(file)))
    }
}
