import Sessions
import Testing

@testable import ServeOptions

private func sessions(_ yaml: String, environment: [String: String] = [:]) throws -> [SessionOptions] {
    try ConfigurationFile(path: "f.yaml", text: yaml, environment: environment).sessions.map(\.options)
}

/// libyaml's events composed into nodes (Sources/ServeOptions/YAML), on their own and as the
/// configuration file reads them.
@Suite("YAML read with libyaml", .timeLimit(.minutes(10)))
struct YAMLTests {
    // MARK: - The document

    @Test func syntaxErrorsNameLibyamlsProblemAndItsPlace() throws {
        let unclosed = try #require(refusal("serve:\n  port: 1\n  host: [0.0.0.0\n"))
        #expect(
            unclosed.description
                == "f.yaml:4:1: not valid YAML: did not find expected ',' or ']' (while parsing a flow sequence at line 3)")

        let tab = try #require(refusal("serve:\n\tport: 1\n"))
        #expect(tab.origin == .file(path: "f.yaml", line: 2, column: 1))
        #expect(tab.message.hasPrefix("not valid YAML: found character that cannot start any token"))

        // A reader error has only a byte offset; its line and column (in characters) are counted.
        #expect(
            refusal("serve:\n  port: 1\n  hôst: \"a\u{1}b\"\n")?.description
                == "f.yaml:3:11: not valid YAML: control characters are not allowed")
    }

    @Test func oneDocumentOnly() throws {
        let two = try #require(refusal("serve:\n  port: 1\n---\nserve:\n  port: 2\n"))
        #expect(two.origin == .file(path: "f.yaml", line: 3, column: 1))
        #expect(two.message.hasPrefix("a second YAML document"))

        // Its markers alone are one document.
        let file = try ConfigurationFile(path: "f.yaml", text: "---\nserve:\n  port: 1\n...\n", environment: [:])
        #expect(file.options.map(\.text) == ["1"])
        #expect(try ConfigurationFile(path: "f.yaml", text: "---\n", environment: [:]).options.isEmpty)
    }

    @Test func aKeyTwiceIsRefusedWhereItIsRepeated() throws {
        #expect(refusal("serve:\n  port: 1\n  host: 127.0.0.1\n  port: 2\n")?.description == "f.yaml:4:3: a key appears twice: port")
        #expect(refusal("sessions:\n  cam: {codec: h264, codec: h265}\n")?.description == "f.yaml:2:22: a key appears twice: codec")
    }

    @Test func aliasesAreCopiesOfTheirAnchorsNode() throws {
        let options = try sessions(
            """
            sessions:
              cam1: &camera
                codec: h265
                decode: on-demand
              cam2: *camera
              cam3: {codec: &codec h264, decode: keyframes}
              cam4: {codec: *codec}
            """)
        #expect(options == [
            SessionOptions(codec: .h265, decode: .onDemand), SessionOptions(codec: .h265, decode: .onDemand),
            SessionOptions(codec: .h264, decode: .keyframes), SessionOptions(codec: .h264),
        ])

        let list = try ConfigurationFile(
            path: "f.yaml", text: "serve:\n  allow-sources: &sources [rtsp://a.example, srt://b.example]\n  hw-devices: *sources\n",
            environment: [:])
        #expect(list.options.map(\.text) == ["rtsp://a.example,srt://b.example", "rtsp://a.example,srt://b.example"])

        // What is said of an alias's whole value is said where the alias is; of a member inside
        // it, where that member is written, under the alias's key.
        #expect(
            refusal("serve:\n  host: &address 127.0.0.1\nsessions:\n  b: *address\n")?.description
                == "f.yaml:4:6: sessions.b: must be a mapping of the session's options (source, codec, decode, ...)")
        #expect(
            refusal("sessions:\n  a: &options\n    quality: 50\n  b:\n    source: *options\n")?.description
                == "f.yaml:3:5: sessions.b.source.quality: unknown option")
    }

    @Test func anAliasNeedsAnAnchorBeforeIt() throws {
        #expect(
            refusal("sessions:\n  a: *camera\n  b: &camera {codec: h264}\n")?.description
                == "f.yaml:2:6: the alias *camera has no anchor &camera before it")
        // A collection's anchor is defined once the collection ends: it cannot hold itself.
        let itself = try #require(refusal("serve:\n  hw-devices: &d [cuda:0, *d]\n"))
        #expect(itself.message == "the alias *d has no anchor &d before it")
    }

    /// Ten lists of ten aliases to the list before stand for 10^9 values: refused at once.
    @Test func aliasesCannotMultiplyWithoutEnd() throws {
        var lines = ["serve:", "  a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        for level in 1...9 {
            lines.append("  a\(level): &a\(level) [" + Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ") + "]")
        }
        let refused = try #require(refusal(lines.joined(separator: "\n")))
        #expect(refused.message == "more than 100000 values (aliases counted as what they copy)")
        #expect(line(of: refused) == 6)
    }

    @Test func nestingIsBounded() throws {
        let deep = try #require(refusal("serve:\n  port: " + String(repeating: "[", count: 100) + String(repeating: "]", count: 100)))
        #expect(deep.message == "nested more than 64 levels deep")
        #expect(line(of: deep) == 2)
        // Each line 32 levels deep, but the alias on the last copies 60 more levels.
        let nest = { (inner: String) in String(repeating: "[", count: 30) + inner + String(repeating: "]", count: 30) }
        let copies = try #require(refusal("serve:\n  a0: &a0 \(nest("x"))\n  a1: &a1 \(nest("*a0"))\n  a2: \(nest("*a1"))\n"))
        #expect(copies.message == "nested more than 64 levels deep")
        #expect(line(of: copies) == 4)
        #expect(refusal("serve:\n  a0: &a0 \(nest("x"))\n  a1: &a1 \(nest("*a0"))\n")?.message == "unknown option")
    }

    @Test func tagsOutsideTheCoreSchemaAreRefused() throws {
        #expect(
            refusal("sessions:\n  a: {codec: !camera h264}\n")?.description
                == "f.yaml:2:14: the tag !camera is not one of !!str, !!int, !!float, !!bool and !!null")
        let binary = try #require(refusal("serve:\n  auth-token: !!binary aGVsbG8=\n"))
        #expect(binary.message == "the tag !!binary is not one of !!str, !!int, !!float, !!bool and !!null")
        let set = try #require(refusal("serve: !!set {a, b}\n"))
        #expect(set.message == "the tag !!set is not !!map")
        #expect(try ConfigurationFile(path: "f.yaml", text: "serve: !!map\n  port: !!int 80\n", environment: [:]).options.map(\.text) == ["80"])
    }

    // MARK: - The core schema

    @Test(arguments: [
        ("", YAMLScalar.Kind.null), ("~", .null), ("null", .null), ("Null", .null), ("NULL", .null),
        ("true", .bool), ("True", .bool), ("FALSE", .bool),
        ("0", .int), ("-12", .int), ("+12", .int), ("0o17", .int), ("0x1F", .int), ("0xff", .int),
        ("1.5", .float), (".5", .float), ("1.", .float), ("-1e3", .float), ("2E+2", .float), (".inf", .float), ("-.Inf", .float),
        (".NaN", .float),
        // YAML 1.1's words and forms are strings in 1.2.
        ("yes", .string), ("off", .string), ("nULL", .string), ("0b101", .string), ("1_000", .string), ("12:30", .string),
        ("0x", .string), ("-0x1", .string), ("0o8", .string), ("+.nan", .string), ("h264", .string), ("rtsp://a", .string),
    ])
    func plainScalarsResolve(_ text: String, _ kind: YAMLScalar.Kind) {
        #expect(YAMLScalar.kind(ofPlain: text) == kind, "\(text)")
    }

    @Test func valuesOfEachKind() throws {
        func plain(_ text: String) -> YAMLScalar { YAMLScalar(text, style: .plain) }
        #expect(plain("0x1F").integer(Int.self) == 31)
        #expect(plain("0o17").integer(Int.self) == 15)
        #expect(plain("-12").integer(Int.self) == -12)
        #expect(plain("300").integer(UInt8.self) == nil)
        #expect(plain("99999999999999999999").integer(Int.self) == nil)
        #expect(plain("1.5").integer(Int.self) == nil)
        #expect(plain("1.5").double == 1.5)
        #expect(plain("0x10").double == 16)
        #expect(plain("-.inf").double == -.infinity)
        #expect(plain(".nan").double?.isNaN == true)
        #expect(plain("True").bool == true)
        #expect(plain("yes").bool == nil)
        // Quoted text is a string whatever it says.
        #expect(YAMLScalar("12", style: .doubleQuoted).kind == .string)
        #expect(YAMLScalar("null", style: .singleQuoted).kind == .string)
        #expect(YAMLScalar("12", style: .literal).kind == .string)
    }

    @Test func aSessionsMembersAreTypedByTheCoreSchema() throws {
        #expect(try sessions("sessions:\n  a: {quality: 0x46}\n") == [SessionOptions(quality: 70)])
        #expect(try sessions("sessions:\n  a: {quality: !!int 70}\n") == [SessionOptions(quality: 70)])
        // A plain ${NAME} is typed by what it stands for.
        #expect(try sessions("sessions:\n  a:\n    quality: ${Q}\n", environment: ["Q": "70"]) == [SessionOptions(quality: 70)])
        // Text is read from any scalar: a number where a word belongs is checked as that word.
        #expect(try #require(refusal("sessions:\n  a: {codec: 264}\n")).message == "codec must be h264 or h265")
        for quality in ["\"70\"", "'70'", "!!str 70", "70.0", "true"] {
            let refused = try #require(refusal("sessions:\n  a: {quality: \(quality)}\n"), "\(quality)")
            #expect(refused.description == "f.yaml:2:7: sessions.a.quality: must be a whole number", "\(quality)")
        }
        #expect(refusal("sessions:\n  a:\n    codec: ~\n")?.description == "f.yaml:3:5: sessions.a.codec: has no value")
        // A null source is the PUT body's null: no source.
        #expect(try sessions("sessions:\n  a: {source: null}\n") == [SessionOptions(source: .some(nil))])
    }

    // MARK: - The decoder over nodes

    private struct Sample: Decodable, Equatable {
        let name: String
        let sizes: [Int]
        let flags: [String: Bool]
        let ratio: Double
        let small: UInt8
        let nothing: String?
    }

    private func decoded(_ yaml: String) throws -> Sample {
        let node = try #require(try YAMLNode.document(yaml))
        return try Sample(from: YAMLNodeDecoder(node))
    }

    @Test func theDecoderReadsListsMappingsAndNumbers() throws {
        let sample = try decoded("name: cam\nsizes: [1, 0x2, -3]\nflags: {a: true, b: False}\nratio: 1.5e1\nsmall: 255\nnothing: ~\n")
        #expect(sample == Sample(name: "cam", sizes: [1, 2, -3], flags: ["a": true, "b": false], ratio: 15, small: 255, nothing: nil))
    }

    @Test func theDecodersRefusalsNameTheirPath() throws {
        func path(_ yaml: String) -> [String]? {
            do {
                _ = try decoded(yaml)
                return nil
            } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context) {
                return context.codingPath.map(\.stringValue)
            } catch DecodingError.keyNotFound(let key, let context) {
                return context.codingPath.map(\.stringValue) + [key.stringValue]
            } catch {
                return ["unexpected: \(error)"]
            }
        }
        let valid = "name: cam\nsizes: []\nflags: {}\nratio: 1\nsmall: 1\n"
        #expect(path(valid) == nil)
        #expect(path(valid.replacing("sizes: []", with: "sizes: [1, two]")) == ["sizes", "1"])
        #expect(path(valid.replacing("flags: {}", with: "flags: {a: yes}")) == ["flags", "a"])
        #expect(path(valid.replacing("small: 1", with: "small: 256")) == ["small"])
        #expect(path(valid.replacing("name: cam", with: "name: [cam]")) == ["name"])
        #expect(path(valid.replacing("name: cam", with: "name:")) == ["name"])
        #expect(path(valid.replacing("ratio: 1\n", with: "")) == ["ratio"])
    }
}
