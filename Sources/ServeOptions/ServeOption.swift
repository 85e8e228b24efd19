import Decoding
import FoundationEssentials

/// One option of `frametap serve`, described once: its long name (`--NAME` on the command line,
/// `FRAMETAP_NAME` in the environment, `NAME:` under the configuration file's `serve:`), how its
/// text is read and checked, its default, its help, and README's row. `ServeOption.all` is the
/// table; the command line, the environment, the file, `--help` and README are all read from it.
public struct ServeOption: Sendable {
    /// Where an option may be given.
    public enum Scope: Sendable, Equatable {
        /// The command line, the environment and the configuration file.
        case everywhere
        /// The command line and the environment: `--config` itself.
        case commandLineAndEnvironment
        /// The command line only: what this run does (`--print-config`), not how the server runs.
        case commandLine
    }

    public let name: String
    /// What the help calls its value (`--port <port>`); nil for a flag, which takes none.
    public let valueName: String?
    /// The values it accepts, in words (`1...256`, `auto, cuda, vaapi or software`); nil when
    /// anything goes (a path, a token).
    public let accepts: String?
    /// One or two sentences; backticks mark literal values (README keeps them, `--help` drops them).
    public let help: String
    /// README's words after the help, in Markdown (links to other sections).
    public let details: String?
    public let scope: Scope
    /// Never shown: `--print-config` writes `<redacted>`, and the file may read it from the file
    /// named by `NAME-file:` instead (a Kubernetes or Docker secret).
    public let isSecret: Bool
    /// Comma-separated on the command line and in the environment; the file may give a YAML list.
    public let isList: Bool
    /// Whether a running server takes a new value from a reading of the configuration file
    /// (`SIGHUP`, or the file changed on disk) without a restart. The others are read once, at
    /// start: a reading that changes one logs that it needs a restart (`SIGHUP` also reads the
    /// TLS files' contents again, whatever `--tls-cert` says).
    public let changesWithoutRestart: Bool
    /// The default: the value the defaults hold, or the rule behind one that depends on the
    /// machine ("cores, at least 2").
    let defaultValue: @Sendable (ServeSettings) -> DefaultValue
    /// Reads `text` into the settings, or says what the option accepts.
    let apply: @Sendable (String, inout ServeSettings) throws(OptionValueError) -> Void

    init(
        _ name: String, valueName: String?, accepts: String?, help: String, details: String? = nil,
        scope: Scope = .everywhere, isSecret: Bool = false, isList: Bool = false, changesWithoutRestart: Bool = false,
        defaultValue: @escaping @Sendable (ServeSettings) -> DefaultValue,
        apply: @escaping @Sendable (String, inout ServeSettings) throws(OptionValueError) -> Void
    ) {
        self.name = name
        self.valueName = valueName
        self.accepts = accepts
        self.help = help
        self.details = details
        self.scope = scope
        self.isSecret = isSecret
        self.isList = isList
        self.changesWithoutRestart = changesWithoutRestart
        self.defaultValue = defaultValue
        self.apply = apply
    }

    public var commandLineName: String { "--" + name }

    /// What every option's environment variable starts with.
    public static let environmentPrefix = "FRAMETAP_"

    /// `FRAMETAP_` and the name in upper case with `_` for `-`; nil for a command-line-only option.
    public var environmentVariable: String? {
        scope == .commandLine ? nil : Self.environmentPrefix + name.uppercased().replacing("-", with: "_")
    }

    public var isInFile: Bool { scope == .everywhere }

    public var isFlag: Bool { valueName == nil }

    /// Its default under serve's defaults, in words.
    public var defaultDescription: String { defaultValue(ServeSettings.defaults).text }
}

/// An option's default as the help and README show it.
public enum DefaultValue: Sendable, Equatable {
    /// A value as it would be written (`8080`, `auto`).
    case literal(String)
    /// The rule behind it, in words ("cores, at least 2", "none").
    case described(String)

    public var text: String {
        switch self {
        case .literal(let text), .described(let text): text
        }
    }
}

/// What an option's value should have been; the caller adds where it came from.
struct OptionValueError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

// MARK: - The kinds of value

/// A whole-number range as the help and the errors state it.
struct IntegerBounds: Sendable {
    let lowest: Int
    let highest: Int?

    static func from(_ lowest: Int) -> IntegerBounds { IntegerBounds(lowest: lowest, highest: nil) }
    static func range(_ range: ClosedRange<Int>) -> IntegerBounds {
        IntegerBounds(lowest: range.lowerBound, highest: range.upperBound)
    }

    func contains(_ value: Int) -> Bool { value >= lowest && highest.map { value <= $0 } ?? true }

    var description: String {
        if let highest { return "\(lowest)...\(highest)" }
        return lowest == 0 ? "0 or more" : "at least \(lowest)"
    }
}

/// A range of seconds; `above` excludes its lower end (a timeout of 0 would never wait).
struct SecondsBounds: Sendable {
    let lowest: Double
    let excludesLowest: Bool
    let highest: Double

    static func above(_ lowest: Double, atMost highest: Double) -> SecondsBounds {
        SecondsBounds(lowest: lowest, excludesLowest: true, highest: highest)
    }
    static func range(_ range: ClosedRange<Double>) -> SecondsBounds {
        SecondsBounds(lowest: range.lowerBound, excludesLowest: false, highest: range.upperBound)
    }

    /// NaN and infinities are in no range.
    func contains(_ value: Double) -> Bool {
        (excludesLowest ? value > lowest : value >= lowest) && value <= highest
    }

    var description: String {
        excludesLowest
            ? "seconds above \(Self.text(lowest)), at most \(Self.text(highest))"
            : "seconds, \(Self.text(lowest))...\(Self.text(highest))"
    }

    static func text(_ seconds: Double) -> String {
        seconds == seconds.rounded() && abs(seconds) < 1e15 ? String(Int(seconds)) : String(seconds)
    }
}

extension ServeOption {
    /// A whole number within `bounds`.
    static func integer<Value: FixedWidthInteger & Sendable>(
        _ name: String, _ path: any WritableKeyPath<ServeSettings, Value> & Sendable, _ bounds: IntegerBounds,
        valueName: String = "n", help: String, details: String? = nil, default described: String? = nil,
        changesWithoutRestart: Bool = false
    ) -> ServeOption {
        ServeOption(
            name, valueName: valueName, accepts: bounds.description, help: help, details: details,
            changesWithoutRestart: changesWithoutRestart,
            defaultValue: { described.map(DefaultValue.described) ?? .literal(String($0[keyPath: path])) },
            apply: { text, settings throws(OptionValueError) in
                let number = try wholeNumber(text, bounds)
                guard let value = Value(exactly: number) else { throw OptionValueError("must be \(bounds.description)") }
                settings[keyPath: path] = value
            })
    }

    /// A memory budget: `auto` (the configuration's default, a share of the memory this process
    /// may use) or bytes, at least 1 MiB.
    static func memoryBudget(
        _ name: String, _ path: any WritableKeyPath<ServeSettings, Int> & Sendable, help: String, details: String
    ) -> ServeOption {
        ServeOption(
            name, valueName: "bytes", accepts: "`auto`, or bytes, at least \(1 << 20)", help: help, details: details,
            defaultValue: { _ in .literal("auto") },
            apply: { text, settings throws(OptionValueError) in
                let word = text.trimmingWhitespace()
                if word == "auto" {
                    return  // the configuration's default budget is the automatic one
                } else if let limit = Int(word), limit >= 1 << 20 {
                    settings[keyPath: path] = limit
                } else {
                    throw OptionValueError("must be 'auto' or a number of bytes of at least \(1 << 20)")
                }
            })
    }

    /// A positive whole number, or `unlimited` (nil).
    static func unlimitedOr(
        _ name: String, _ path: any WritableKeyPath<ServeSettings, Int?> & Sendable, valueName: String, accepts: String,
        help: String, details: String? = nil
    ) -> ServeOption {
        ServeOption(
            name, valueName: valueName, accepts: accepts, help: help, details: details,
            defaultValue: { .literal($0[keyPath: path].map(String.init) ?? "unlimited") },
            apply: { text, settings throws(OptionValueError) in
                let word = text.trimmingWhitespace()
                if word == "unlimited" {
                    settings[keyPath: path] = nil
                } else if let limit = Int(word), limit >= 1 {
                    settings[keyPath: path] = limit
                } else {
                    throw OptionValueError("must be a positive integer or 'unlimited'")
                }
            })
    }

    /// Seconds within `bounds`, kept to the millisecond.
    static func seconds(
        _ name: String, _ path: any WritableKeyPath<ServeSettings, Duration> & Sendable, _ bounds: SecondsBounds,
        help: String, details: String? = nil, changesWithoutRestart: Bool = false
    ) -> ServeOption {
        ServeOption(
            name, valueName: "seconds", accepts: bounds.description, help: help, details: details,
            changesWithoutRestart: changesWithoutRestart,
            defaultValue: { .literal(secondsText($0[keyPath: path])) },
            apply: { text, settings throws(OptionValueError) in
                guard let seconds = Double(text.trimmingWhitespace()), bounds.contains(seconds) else {
                    throw OptionValueError("must be \(bounds.description)")
                }
                settings[keyPath: path] = .milliseconds(Int64(seconds * 1000))
            })
    }

    /// One of an enumeration's raw values.
    static func choice<Value: RawRepresentable<String> & CaseIterable & Sendable>(
        _ name: String, _ path: any WritableKeyPath<ServeSettings, Value> & Sendable, valueName: String,
        ignoringCase: Bool = false, help: String, details: String? = nil, changesWithoutRestart: Bool = false
    ) -> ServeOption {
        let accepts = listed(Value.allCases.map(\.rawValue), "or")
        return ServeOption(
            name, valueName: valueName, accepts: accepts, help: help, details: details,
            changesWithoutRestart: changesWithoutRestart,
            defaultValue: { .literal($0[keyPath: path].rawValue) },
            apply: { text, settings throws(OptionValueError) in
                let word = text.trimmingWhitespace()
                guard let value = Value(rawValue: ignoringCase ? word.lowercased() : word) else {
                    throw OptionValueError("must be \(accepts)")
                }
                settings[keyPath: path] = value
            })
    }

    /// Text taken as it is (a path, a token), after `check`. An empty text is refused: a
    /// variable left empty by a template (`FRAMETAP_AUTH_TOKEN: ${TOKEN}` with no `TOKEN`) must
    /// not turn access control, TLS or the kept sessions off; leaving the option out does.
    static func text(
        _ name: String, _ path: any WritableKeyPath<ServeSettings, String?> & Sendable, valueName: String,
        scope: Scope = .everywhere, isSecret: Bool = false, help: String, details: String? = nil,
        check: @escaping @Sendable (String) throws(OptionValueError) -> Void = { _ in }
    ) -> ServeOption {
        ServeOption(
            name, valueName: valueName, accepts: nil, help: help, details: details, scope: scope, isSecret: isSecret,
            defaultValue: { $0[keyPath: path].map(DefaultValue.literal) ?? .described("none") },
            apply: { text, settings throws(OptionValueError) in
                guard !text.trimmingWhitespace().isEmpty else {
                    throw OptionValueError("is empty: leave the option out for none")
                }
                try check(text)
                settings[keyPath: path] = text
            })
    }

    /// Reads a whole number within `bounds`, or says what it must be.
    static func wholeNumber(_ text: String, _ bounds: IntegerBounds) throws(OptionValueError) -> Int {
        guard let number = Int(text.trimmingWhitespace()) else {
            throw OptionValueError("must be a whole number, \(bounds.description)")
        }
        guard bounds.contains(number) else { throw OptionValueError("must be \(bounds.description)") }
        return number
    }
}

/// `a, b or c`.
func listed(_ words: [String], _ conjunction: String) -> String {
    guard words.count > 1 else { return words.first ?? "" }
    return words.dropLast().joined(separator: ", ") + " \(conjunction) " + words[words.count - 1]
}

/// A duration as the options write it: whole seconds, or seconds with their fraction.
func secondsText(_ duration: Duration) -> String {
    let (seconds, attoseconds) = duration.components
    if attoseconds == 0 { return String(seconds) }
    return SecondsBounds.text(Double(seconds) + Double(attoseconds) / 1e18)
}
