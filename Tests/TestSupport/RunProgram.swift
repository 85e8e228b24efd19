import Foundation

/// Runs a program and returns its standard output; throws `TestFailure` when it exits non-zero.
/// Standard output goes through a temporary file: reading a Pipe from concurrently running tests
/// tripped Foundation's exclusivity checks.
@discardableResult
public func runProgram(_ executable: String, _ arguments: [String]) throws -> Data {
    let output = FileManager.default.temporaryDirectory.appendingPathComponent("frametap-test-stdout-\(UUID().uuidString)")
    guard FileManager.default.createFile(atPath: output.path, contents: nil) else {
        throw TestFailure("cannot create \(output.path)")
    }
    defer { try? FileManager.default.removeItem(at: output) }
    let handle = try FileHandle(forWritingTo: output)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardOutput = handle
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    try handle.close()
    guard process.terminationStatus == 0 else {
        throw TestFailure("\(executable) \(arguments.joined(separator: " ")) exited \(process.terminationStatus)")
    }
    return try Data(contentsOf: output)
}
