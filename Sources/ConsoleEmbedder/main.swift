import Foundation

// The EmbedConsole build plugin's tool: `ConsoleEmbedder OUTPUT.swift FILE...` writes an enum
// `ConsoleFiles` with each file's name and its bytes as a base64 string literal. A string literal
// compiles in no time where a byte-array literal of the same size takes the type checker a minute;
// decoding it once at start-up costs well under a millisecond.

let arguments = CommandLine.arguments.dropFirst()
guard let outputPath = arguments.first else {
    FileHandle.standardError.write(Data("usage: ConsoleEmbedder OUTPUT.swift FILE...\n".utf8))
    exit(64)
}

var source = """
    // Generated at build time by the EmbedConsole plugin (Plugins/EmbedConsole) from
    // Sources/FrameTapAPI/Console. Never edited or committed by hand.

    enum ConsoleFiles {
        /// Each console file's name (served as /console/NAME) and its bytes in base64.
        static let base64: [(name: String, base64: String)] = [

    """
for path in arguments.dropFirst().sorted() {
    let url = URL(fileURLWithPath: path)
    let name = url.lastPathComponent
    // Names end up in URLs and in a Swift string literal: keep them plain.
    guard name.utf8.allSatisfy({ $0 < 0x80 && ($0 == 0x2E || $0 == 0x2D || $0 == 0x5F || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)) }) else {
        FileHandle.standardError.write(Data("ConsoleEmbedder: \(path): use only letters, digits, '.', '-' and '_' in console file names\n".utf8))
        exit(65)
    }
    do {
        let bytes = try Data(contentsOf: url)
        source += "        (\"\(name)\", \"\(bytes.base64EncodedString())\"),\n"
    } catch {
        FileHandle.standardError.write(Data("ConsoleEmbedder: cannot read \(path): \(error)\n".utf8))
        exit(66)
    }
}
source += "    ]\n}\n"

// Rewriting an unchanged file would make the compiler rebuild FrameTapAPI for nothing.
let outputURL = URL(fileURLWithPath: outputPath)
if (try? Data(contentsOf: outputURL)) != Data(source.utf8) {
    do {
        try Data(source.utf8).write(to: outputURL, options: .atomic)
    } catch {
        FileHandle.standardError.write(Data("ConsoleEmbedder: cannot write \(outputPath): \(error)\n".utf8))
        exit(73)
    }
}
