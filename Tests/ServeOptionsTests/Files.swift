import FoundationEssentials

@testable import ServeOptions

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

/// Why `yaml`, read as the configuration file `f.yaml`, is refused; nil when it is taken.
func refusal(_ yaml: String, environment: [String: String] = [:]) -> ServeConfigurationError? {
    do {
        _ = try ConfigurationFile(path: "f.yaml", text: yaml, environment: environment)
        return nil
    } catch {
        return error
    }
}

/// The line an error names, or nil when it names none.
func line(of error: ServeConfigurationError) -> Int? {
    if case .file(_, let line, _) = error.origin { return line }
    return nil
}
