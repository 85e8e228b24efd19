import Containers
import Decoding
import Ingest
import Sessions
import Testing

@testable import ServeOptions

@Suite("The configuration file", .timeLimit(.minutes(10)))
struct ConfigurationFileTests {
    @Test func optionsUnderTheirLongNames() throws {
        let file = try ConfigurationFile(
            path: "f.yaml",
            text: """
                # a comment
                serve:
                  port: 9000
                  allow-sources:
                    - rtsp://10.0.0.0/8
                    - https://*.example
                  hw-devices: cuda:0,cuda:1
                sessions:
                """, environment: [:])
        #expect(file.options.map(\.option.name) == ["port", "allow-sources", "hw-devices"])
        #expect(file.options.map(\.text) == ["9000", "rtsp://10.0.0.0/8,https://*.example", "cuda:0,cuda:1"])
        #expect(file.options.map(\.origin) == [3, 4, 7].map { .file(path: "f.yaml", line: $0, column: 3) })
        #expect(file.sessions.isEmpty)
    }

    @Test func anEmptyFileSetsNothing() throws {
        #expect(try ConfigurationFile(path: "f.yaml", text: "", environment: [:]).options.isEmpty)
        #expect(try ConfigurationFile(path: "f.yaml", text: "# nothing yet\nserve:\nsessions: {}\n", environment: [:]).options.isEmpty)
    }

    @Test func sessionsAreThePutBody() throws {
        let file = try ConfigurationFile(
            path: "f.yaml",
            text: """
                sessions:
                  cam1:
                    source:
                      url: rtsp://cam1.example/stream
                      transport: udp
                    codec: h265
                    decode: on-demand
                    backend: software
                    quality: 70
                  cam2:
                  cam.3: {decode: keyframes}
                  door:
                    source: {url: rtsp://door.example/stream, connect: on-demand}
                """, environment: [:])
        #expect(file.sessions.map(\.id.rawValue) == ["cam1", "cam2", "cam.3", "door"])
        let first = file.sessions[0].options
        #expect(first == SessionOptions(
            backend: .software, codec: .h265, decode: .onDemand, quality: 70,
            source: .some(PullSourceSpec(url: try SourceURL("rtsp://cam1.example/stream"), transport: .udp))))
        #expect(file.sessions[1].options == SessionOptions())
        #expect(file.sessions[2].options == SessionOptions(decode: .keyframes))
        #expect(file.sessions[3].options == SessionOptions(
            source: .some(PullSourceSpec(url: try SourceURL("rtsp://door.example/stream"), connect: .onDemand))))
        #expect(file.sessions[0].origin == .file(path: "f.yaml", line: 2, column: 3))
    }

    // MARK: - Every kind of error, with its line

    @Test func unknownKeysWithTheNearestKnownOne() throws {
        #expect(refusal("serve:\n  port: 1\nsesions:\n  a: {}\n")?.description == "f.yaml:3:1: sesions: unknown section (did you mean 'sessions'?)")
        #expect(refusal("serve:\n  port: 1\n  max-sesions: 4\n")?.description == "f.yaml:3:3: serve.max-sesions: unknown option (did you mean 'max-sessions'?)")
        #expect(refusal("serve:\n  colour: blue\n")?.description == "f.yaml:2:3: serve.colour: unknown option")
        #expect(refusal("sessions:\n  cam:\n    codec: h264\n    decod: all\n")?.description == "f.yaml:4:5: sessions.cam.decod: unknown option (did you mean 'decode'?)")
        #expect(
            refusal("sessions:\n  cam:\n    source:\n      url: rtsp://a.example/\n      trasport: tcp\n")?.description
                == "f.yaml:5:7: sessions.cam.source.trasport: unknown option (did you mean 'transport'?)")
        #expect(
            refusal("sessions:\n  cam:\n    source:\n      url: rtsp://a.example/\n      pasword: x\n")?.description
                == "f.yaml:5:7: sessions.cam.source.pasword: unknown option (did you mean 'password'?)")
        #expect(
            refusal("serve:\n  print-config: true\n")?.description
                == "f.yaml:2:3: serve.print-config: --print-config is given on the command line or in the environment")
    }

    @Test func wrongTypes() throws {
        #expect(refusal("serve:\n  port:\n    number: 8080\n")?.description == "f.yaml:3:5: serve.port: must be a single value, not a mapping")
        #expect(refusal("serve:\n  max-sessions: [1, 2]\n")?.description == "f.yaml:2:17: serve.max-sessions: must be a single value, not a list")
        #expect(refusal("serve:\n  port:\n")?.description == "f.yaml:2:8: serve.port: has no value")
        #expect(refusal("serve: 8080\n")?.description == "f.yaml:1:8: serve: must be a mapping of options (port: 8080)")
        #expect(refusal("sessions:\n  cam:\n    decode: all\n    quality: high\n")?.description == "f.yaml:4:5: sessions.cam.quality: must be a whole number")
        #expect(refusal("sessions:\n  cam:\n    source: rtsp://a.example/\n")?.description == "f.yaml:3:5: sessions.cam.source: must be a mapping")
        #expect(
            refusal("sessions:\n  cam: on-demand\n")?.description
                == "f.yaml:2:8: sessions.cam: must be a mapping of the session's options (source, codec, decode, ...)")
        #expect(refusal("- serve\n")?.description == "f.yaml:1:1: the file must be a mapping with serve: and sessions:")
    }

    @Test func invalidValues() throws {
        // A serve: value is checked when the configuration is resolved, with the same words as
        // on the command line, and the file's line and key.
        let folder = try TemporaryFolder()
        let path = try folder.write("f.yaml", "serve:\n  max-sessions: 2\n  history-seconds: 0\n")
        #expect(throws: ServeConfigurationError(
            "must be seconds above 0, at most 3600, not '0'", origin: .file(path: path, line: 3, column: 3),
            key: "serve.history-seconds")) {
            try ServeConfiguration(arguments: ["--config", path], environment: [:])
        }

        #expect(refusal("sessions:\n  cam:\n    codec: h266\n")?.description == "f.yaml:3:5: sessions.cam.codec: codec must be h264 or h265")
        #expect(refusal("sessions:\n  cam:\n    quality: 0\n")?.description == "f.yaml:3:5: sessions.cam.quality: quality must be 1...100")
        #expect(
            refusal("sessions:\n  cam:\n    source:\n      transport: tcp\n      url: ftp://a.example/x\n")?.description
                == "f.yaml:5:7: sessions.cam.source.url: FrameTap pulls rtsp, rtmp, srt, http and https URLs, not ftp")
        #expect(
            refusal("sessions:\n  cam:\n    source:\n      transport: tcp\n")?.description
                == "f.yaml:3:5: sessions.cam.source: a source needs its url")
        #expect(
            refusal("sessions:\n  cam:\n    source:\n      url: srt://a.example:9000\n      transport: tcp\n")?.description
                == "f.yaml:5:7: sessions.cam.source.transport: srt runs over udp only; transport chooses for rtsp")
        #expect(
            refusal("sessions:\n  cam/1:\n    decode: all\n")?.description
                == "f.yaml:2:3: sessions.cam/1: session id must be 1...128 characters from A-Z a-z 0-9 . _ ~ -")
        #expect(
            refusal("sessions:\n  cam:\n    source:\n      url: rtsp://a.example/\n      connect: sometimes\n")?.description
                == "f.yaml:5:7: sessions.cam.source.connect: source connect must be always or on-demand")
        #expect(refusal("sessions:\n  cam:\n    source:\n      url: rtsp://a.example/\n      conect: on-demand\n")?.suggestion == "connect")
    }

    @Test func notYAMLAtAll() throws {
        let broken = try #require(refusal("serve:\n  port: 1\n  host: [0.0.0.0\n"))
        #expect(line(of: broken) != nil)
        #expect(broken.message.hasPrefix("not valid YAML"))

        let twice = try #require(refusal("serve:\n  port: 1\n  port: 2\n"))
        #expect(twice.message == "a key appears twice: port")
        #expect(line(of: twice) != nil)
    }

    // MARK: - Secrets

    @Test func variablesFromTheEnvironment() throws {
        let environment = ["CAM_HOST": "door.example", "TOKEN": "s3cret", "EMPTY": ""]
        let file = try ConfigurationFile(
            path: "f.yaml",
            text: """
                serve:
                  auth-token: ${TOKEN}
                  host: ${EMPTY}127.0.0.1
                sessions:
                  door:
                    source:
                      url: rtsp://${CAM_HOST}/live?x=$${literal}
                """, environment: environment)
        #expect(file.options.map(\.text) == ["s3cret", "127.0.0.1"])
        #expect(file.sessions[0].options.source??.url.openedText() == "rtsp://door.example:554/live?x=${literal}")

        let unset = try #require(refusal("serve:\n  port: 1\n  auth-token: ${NOT_SET}\n"))
        #expect(unset.description == "f.yaml:3:15: serve.auth-token: the environment variable NOT_SET is not set")
        let unclosed = try #require(refusal("serve:\n  auth-token: ${TOKEN\n", environment: environment))
        #expect(unclosed.message.hasPrefix("'${' without its '}'"))
        let badName = try #require(refusal("serve:\n  auth-token: ${1X}\n", environment: environment))
        #expect(badName.message == "'${1X}' is not an environment variable's name")
    }

    @Test func secretsFromFiles() throws {
        let folder = try TemporaryFolder()
        let token = try folder.write("token", "from-a-secret\n")
        let url = try folder.write("url", "rtsp://user:pw@cam.example/stream\r\n")
        let password = try folder.write("password", "p@ss:w/rd\n")
        let file = try ConfigurationFile(
            path: "f.yaml",
            text: """
                serve:
                  auth-token-file: \(token)
                  jwt-secret-file: ${SECRET_PATH}
                sessions:
                  a:
                    source:
                      url-file: \(url)
                  b:
                    source:
                      url: rtsp://cam.example:8554/b
                      username: admin
                      password-file: \(password)
                """, environment: ["SECRET_PATH": token])
        #expect(file.options.map(\.option.name) == ["auth-token", "jwt-secret"])
        #expect(file.options.map(\.text) == ["from-a-secret", "from-a-secret"])
        #expect(file.sessions[0].options.source??.url.openedText() == "rtsp://user:pw@cam.example:554/stream")
        let b = try #require(file.sessions[1].options.source??.url)
        #expect(b.openedText() == "rtsp://admin:p%40ss%3Aw%2Frd@cam.example:8554/b")
        #expect(b.redacted == "rtsp://***@cam.example:8554/b")

        let missing = try #require(refusal("serve:\n  auth-token-file: \(folder.path)/nothing\n"))
        #expect(missing.key == "serve.auth-token-file")
        #expect(missing.message == "cannot read the file \(folder.path)/nothing")

        let both = try #require(refusal("serve:\n  auth-token: a\n  auth-token-file: \(token)\n"))
        #expect(line(of: both) == 3)
        #expect(both.message.hasPrefix("auth-token is given twice"))

        let notSecret = try #require(refusal("serve:\n  port-file: \(token)\n"))
        #expect(notSecret.message == "unknown option")

        let twoURLs = try #require(refusal("sessions:\n  a:\n    source:\n      url: rtsp://a.example/\n      url-file: \(url)\n"))
        #expect(twoURLs.message == "give url or url-file, not both")

        let credentialsTwice = try #require(
            refusal("sessions:\n  a:\n    source:\n      url: rtsp://u:p@a.example/\n      username: v\n"))
        #expect(credentialsTwice.key == "sessions.a.source.url")
        #expect(credentialsTwice.message.hasPrefix("the url already has credentials"))

        let passwordAlone = try #require(
            refusal("sessions:\n  a:\n    source:\n      url: rtsp://a.example/\n      password: p\n"))
        #expect(passwordAlone.message == "a password needs its username")
    }

    @Test func printedConfigurationRedactsSecrets() throws {
        let folder = try TemporaryFolder()
        let path = try folder.write(
            "f.yaml",
            """
            serve:
              auth-token: ${TOKEN}
              max-sessions: 7
            sessions:
              door:
                source:
                  url: rtsp://cam.example/live
                  username: admin
                  password: ${PASSWORD}
                  connect: on-demand
                decode: on-demand
                owner: site-a
            """)
        let environment = ["TOKEN": "token-value-123", "PASSWORD": "password-value-456", "FRAMETAP_PORT": "9100"]
        let configuration = try ServeConfiguration(arguments: ["--config", path, "--print-config"], environment: environment)
        #expect(configuration.printConfiguration)
        let printed = configuration.printed
        #expect(!printed.contains("token-value-123"))
        #expect(!printed.contains("password-value-456"))
        #expect(printed.contains("  auth-token: ${FRAMETAP_AUTH_TOKEN}  # \(path):2:3, not shown\n"))
        #expect(printed.contains("  port: 9100  # FRAMETAP_PORT\n"))
        #expect(printed.contains("  max-sessions: 7  # \(path):3:3\n"))
        #expect(printed.contains("  # history-seconds: 10  (default)\n"))
        #expect(printed.contains("      url: ${SOURCE_URL_DOOR}  # rtsp://***@cam.example:554/live, credentials not shown\n"))

        // What it prints reads back as the same configuration, the secret from its variable, and
        // is refused, naming the variable, where that is not set.
        let reread = try ConfigurationFile(
            path: "printed.yaml", text: printed,
            environment: [
                "FRAMETAP_AUTH_TOKEN": "token-value-123", "SOURCE_URL_DOOR": "rtsp://admin:password-value-456@cam.example/live",
            ])
        #expect(reread.options.map(\.option.name) == ["port", "max-sessions", "auth-token"])
        #expect(reread.options.first { $0.option.name == "auth-token" }?.text == "token-value-123")
        #expect {
            _ = try ConfigurationFile(path: "printed.yaml", text: printed, environment: [:])
        } throws: { error in
            "\(error)".contains("FRAMETAP_AUTH_TOKEN")
        }
        #expect {
            _ = try ConfigurationFile(path: "printed.yaml", text: printed, environment: ["FRAMETAP_AUTH_TOKEN": "t"])
        } throws: { error in
            "\(error)".contains("SOURCE_URL_DOOR")
        }
        #expect(
            reread.sessions.map { $0.options.source??.url.openedText() }
                == configuration.declaredSessions.map { $0.options.source??.url.openedText() })
        #expect(ServeConfiguration.urlVariable(of: try SessionID("cam-1.yard")) == "SOURCE_URL_CAM_1_YARD")
        #expect(reread.sessions.map(\.options.decode) == [.onDemand])
        #expect(reread.sessions.map { $0.options.source??.connect } == [.onDemand])
        #expect(reread.sessions.map { $0.options.owner??.rawValue } == ["site-a"])
    }

    /// Ids that differ in case or punctuation get variables of their own.
    @Test func printedSourceVariablesAreDistinct() throws {
        let folder = try TemporaryFolder()
        let path = try folder.write(
            "f.yaml",
            """
            sessions:
              cam-1:
                source: {url: "rtsp://a:b@cam.example/one"}
              cam.1:
                source: {url: "rtsp://a:b@cam.example/two"}
              cam-2:
                source: {url: "rtsp://cam.example/three"}
            """)
        let printed = try ServeConfiguration(arguments: ["--config", path], environment: [:]).printed
        #expect(printed.contains("url: ${SOURCE_URL_CAM_1}  #"))
        #expect(printed.contains("url: ${SOURCE_URL_CAM_1_2}  #"))
        #expect(printed.contains("url: \"rtsp://cam.example:554/three\"") || printed.contains("url: rtsp://cam.example:554/three"))
    }

    @Test func theExampleParses() throws {
        let path = repositoryRoot + "/deploy/frametap.yaml"
        let environment = ["FRONT_DOOR_USER": "viewer", "FRONT_DOOR_PASSWORD": "pass word"]
        let configuration = try ServeConfiguration(arguments: ["--config", path], environment: environment)
        #expect(configuration.declaredSessions.map(\.id.rawValue) == ["front-door", "yard"])
        let door = try #require(configuration.declaredSessions[0].options.source??.url)
        #expect(door.openedText() == "rtsp://viewer:pass%20word@front-door.example:554/Streaming/Channels/101")
        #expect(configuration.declaredSessions[0].options.decode == .onDemand)
        #expect(configuration.declaredSessions[0].options.source??.connect == .onDemand)
        #expect(configuration.declaredSessions[1].options == SessionOptions(codec: .h265, decode: .keyframes, quality: 80))
        #expect(configuration.server.maxSessions == 32)
        #expect(configuration.server.sourcePolicy.allowsAnything)
        // Without its variables the example says which one is missing.
        #expect(throws: ServeConfigurationError.self) {
            try ServeConfiguration(arguments: ["--config", path], environment: [:])
        }
    }
}
