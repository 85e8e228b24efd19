/// `serve`'s arguments, read against the option table: `--name value` and `--name=value`, a
/// flag alone; the last of an option given twice wins. `-h` or `--help` asks for the help.
public struct CommandLineOptions: Sendable {
    public struct Given: Sendable {
        public let option: ServeOption
        public let text: String
    }

    /// In the order given.
    public private(set) var given: [Given] = []
    public private(set) var helpRequested = false

    public init(_ arguments: [String], options: [ServeOption] = ServeOption.all) throws(ServeConfigurationError) {
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            if argument == "-h" || argument == "--help" {
                helpRequested = true
                continue
            }
            guard argument.hasPrefix("--"), argument.count > 2 else {
                throw ServeConfigurationError("unexpected argument '\(argument)' (serve takes options only)")
            }
            let body = argument.dropFirst(2)
            let name = String(body.prefix { $0 != "=" })
            let attached = body.firstIndex(of: "=").map { String(body[body.index(after: $0)...]) }
            guard let option = options.first(where: { $0.name == name }) else {
                throw ServeConfigurationError(
                    "unknown option '--\(name)'",
                    suggestion: nearestName(to: name, among: options.map(\.name)).map { "--" + $0 })
            }
            if option.isFlag {
                guard attached == nil else { throw ServeConfigurationError("\(option.commandLineName) takes no value") }
                given.append(Given(option: option, text: ""))
                continue
            }
            if let attached {
                given.append(Given(option: option, text: attached))
            } else if let next = remaining.first, !next.hasPrefix("--") {
                remaining.removeFirst()
                given.append(Given(option: option, text: next))
            } else {
                throw ServeConfigurationError("missing value for '\(option.commandLineName) <\(option.valueName ?? "value")>'")
            }
        }
    }

    /// The last value given for `option`, if any.
    func value(of option: ServeOption) -> String? {
        given.last { $0.option.name == option.name }?.text
    }
}
