import FoundationEssentials

/// A folder of its own under the temporary directory, for files a test writes and reads back.
final class TemporaryFolder {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.path + "/frametap-serve-options-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Writes `text` to `name` in the folder and returns its path.
    @discardableResult
    func write(_ name: String, _ text: String) throws -> String {
        let file = path + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        return file
    }
}

/// The repository's root, from this file's place in it.
let repositoryRoot: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)  // Tests/ServeOptionsTests/Files.swift
    return parts.joined(separator: "/")
}()
