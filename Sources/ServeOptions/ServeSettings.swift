import FoundationEssentials
import HTTPServer
import Imaging
import Logging
import ServiceLog
import Sessions

/// What the options write into: today's configuration types, and the few values that become
/// something else only once every option is read (the TLS pair, access control). The defaults are the configuration types' own, read here; serve differs from them
/// only where a server differs from the libraries (see `defaults`).
public struct ServeSettings: Sendable {
    public var http: HTTPServerConfiguration
    public var server: ServerConfiguration
    public var authToken: String?
    public var jwtSecret: String?
    public var jwksFile: String?
    public var tlsCertificate: String?
    public var tlsKey: String?
    public var logLevel: Logger.Level
    public var logFormat: LogFormat = .text
    public var configurationFile: String?
    /// `--state-dir`: where the sessions made by `PUT` are kept.
    public var stateDirectory: String?
    public var printConfiguration: Bool
    /// `--encoder`: how pictures are encoded (`PictureEncoders.standard`).
    public var encoder: PictureEncoderChoice = .auto

    /// The configuration types' defaults, except that a server listens on every address (it
    /// runs in containers; the HTTP library's default is loopback) with one thread per core, at
    /// least 2 (the library's default is 2), and logs at `info`.
    public static var defaults: ServeSettings {
        var http = HTTPServerConfiguration()
        http.host = "0.0.0.0"
        http.threadPoolSize = max(2, ProcessInfo.processInfo.activeProcessorCount)
        return ServeSettings(http: http, server: ServerConfiguration(), logLevel: .info, printConfiguration: false)
    }

    init(
        http: HTTPServerConfiguration, server: ServerConfiguration, logLevel: Logger.Level, printConfiguration: Bool
    ) {
        self.http = http
        self.server = server
        self.logLevel = logLevel
        self.printConfiguration = printConfiguration
    }
}
