import Foundation

/// Runs a program and returns its standard output; throws `TestFailure` with the end of its
/// standard error when it exits non-zero, `WaitTimeout` (after killing it) when it runs past
/// `timeout`. Its output goes through temporary files, never pipes: a pipe is read only after
/// the program ends, so a full one would stall it (and reading a Pipe from concurrently running
/// tests tripped Foundation's exclusivity checks).
@discardableResult
public func runProgram(_ executable: String, _ arguments: [String], timeout: Duration = .seconds(120)) throws -> Data {
    let base = FileManager.default.temporaryDirectory.appendingPathComponent("frametap-test-\(UUID().uuidString)")
    let output = base.appendingPathExtension("stdout")
    let errors = base.appendingPathExtension("stderr")
    for file in [output, errors] {
        guard FileManager.default.createFile(atPath: file.path, contents: nil) else { throw TestFailure("cannot create \(file.path)") }
    }
    defer {
        try? FileManager.default.removeItem(at: output)
        try? FileManager.default.removeItem(at: errors)
    }
    let outputHandle = try FileHandle(forWritingTo: output)
    defer { try? outputHandle.close() }
    let errorHandle = try FileHandle(forWritingTo: errors)
    defer { try? errorHandle.close() }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = outputHandle
    process.standardError = errorHandle
    let command = ([executable] + arguments).joined(separator: " ")
    try process.run()
    try process.waitForExit("\(command) to end", timeout: timeout)
    guard process.terminationStatus == 0 else {
        let message = String(decoding: (try? Data(contentsOf: errors)) ?? Data(), as: UTF8.self)
        throw TestFailure("\(command) exited \(process.terminationStatus): \(message.suffix(2000))")
    }
    return try Data(contentsOf: output)
}
