import Foundation
import PackagePlugin

/// Turns the files of a target's `Console` folder into one generated Swift source,
/// `ConsoleFiles.swift`, that holds each file as a base64 string literal (see ConsoleEmbedder).
///
/// Why not SwiftPM's `resources: [.embedInCode("Console")]`: it works on this toolchain (6.3.1),
/// but it emits every byte as one element of a `[UInt8]` array literal (420 KB of Swift for the
/// console's 120 KB), which is slow to compile. Measured on the shared 2-core build host, debug
/// builds, medians of three: after editing a console file 26 s of CPU (37-45 s wall) with
/// `.embedInCode` against 2.3 s (6-7 s wall) with this plugin; after editing any Swift file of
/// FrameTapAPI 10.5 s (18-24 s wall) against 1.7 s (4.5-5 s wall), about what the target costs
/// without a console (1.2-1.4 s). The generated base64 file type-checks in 0.07 s. The folder is
/// excluded from the target (`exclude: ["Console"]`) so that SwiftPM does not also report its
/// files as unhandled.
@main
struct EmbedConsole: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let folder = target.directoryURL.appending(path: "Console")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path(percentEncoded: false))
            .filter { !$0.hasPrefix(".") }
            .sorted()
        let inputs = names.map { folder.appending(path: $0) }
        let output = context.pluginWorkDirectoryURL.appending(path: "ConsoleFiles.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(inputs.count) console files",
                executable: try context.tool(named: "ConsoleEmbedder").url,
                arguments: [output.path(percentEncoded: false)] + inputs.map { $0.path(percentEncoded: false) },
                inputFiles: inputs,
                outputFiles: [output])
        ]
    }
}
