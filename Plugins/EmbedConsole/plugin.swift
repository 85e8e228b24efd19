import Foundation
import PackagePlugin

/// Turns the files of a target's `Console` folder into one generated Swift source,
/// `ConsoleFiles.swift`, that holds each file as a base64 string literal (see ConsoleEmbedder).
///
/// Why not SwiftPM's `resources: [.embedInCode("Console")]`: it works on this toolchain, but it
/// emits every byte as an element of a `[UInt8]` array literal, which the type checker is slow
/// on. For the console's ~115 KB on the 2-core build host it made a debug build of FrameTapAPI
/// take 69 s after any asset edit and 26 s after any Swift edit in the target (3 s without it);
/// the same files as string literals compile in about a second. The folder must be excluded from
/// the target (`exclude: ["Console"]`), so SwiftPM does not also treat it as unhandled files.
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
