import ArgumentParser
import FrameTapAPI

@main
struct FrameTapCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frametap",
        abstract: "H.264 and H.265 in, pictures out: an HTTP frame service and its offline tools.",
        discussion: """
            Exit codes: 0 success; 1 no decodable picture or decoding failed; 3 input or output \
            error; 4 the input is neither H.264 nor H.265 (no start code, or no parameter set of either), or is \
            a container file; 64 bad usage.
            """,
        version: SystemInfo.version,
        subcommands: [ServeCommand.self, SyncCommand.self, DecodeCommand.self, ProbeCommand.self, HealthcheckCommand.self]
    )
}

/// The documented exit codes of `decode` and `probe` (64, bad usage, is ArgumentParser's own).
enum ExitStatus {
    static let noDecodablePicture = ExitCode(1)
    static let inputOutput = ExitCode(3)
    /// Neither H.264 nor H.265: no start code, or no parameter set of either codec.
    static let notVideo = ExitCode(4)
}
