import ArgumentParser

struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Run the HTTP service.")
    func run() throws {
        printError("frametap: serve is not available in this build yet")
        throw ExitCode(2)
    }
}
