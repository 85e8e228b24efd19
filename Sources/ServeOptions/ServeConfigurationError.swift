/// Where a value of the configuration came from.
public enum OptionOrigin: Sendable, Equatable, CustomStringConvertible {
    /// `--name` on the command line.
    case commandLine(String)
    /// An environment variable.
    case environment(String)
    /// A line of the configuration file (lines and columns count from 1).
    case file(path: String, line: Int, column: Int)
    /// Nobody gave it: the default.
    case defaultValue

    public var description: String {
        switch self {
        case .commandLine(let name): name
        case .environment(let name): name
        case .file(let path, let line, let column): "\(path):\(line):\(column)"
        case .defaultValue: "default"
        }
    }
}

/// Why `frametap serve` cannot start with what it was given: where the value came from, which
/// key it is, what is wrong, and the known name it was probably meant to be.
public struct ServeConfigurationError: Error, Equatable, CustomStringConvertible {
    /// nil for a problem of no one place (a file that cannot be read, two options that go together).
    public let origin: OptionOrigin?
    /// The key as the file names it (`serve.max-sessions`, `sessions.cam1.source.url`); nil on
    /// the command line and in the environment, whose origin is the name.
    public let key: String?
    public let message: String
    /// The known name nearest to an unknown one, when it looks like a typo.
    public let suggestion: String?

    public init(_ message: String, origin: OptionOrigin? = nil, key: String? = nil, suggestion: String? = nil) {
        self.message = message
        self.origin = origin
        self.key = key
        self.suggestion = suggestion
    }

    /// `file:line:column: key: message (did you mean 'x'?)`, or `--name: message`.
    public var description: String {
        var text = [origin?.description, key].compactMap { $0 }.map { $0 + ": " }.joined() + message
        if let suggestion { text += " (did you mean '\(suggestion)'?)" }
        return text
    }
}

/// The known name within a small edit distance of `name` (a typo: one or two letters wrong,
/// missing, extra or swapped), the nearest first; nil when none is that near.
func nearestName(to name: String, among known: some Sequence<String>) -> String? {
    let limit = max(1, min(3, name.count / 3))
    var best: (name: String, distance: Int)?
    for candidate in known {
        let distance = editDistance(name, candidate)
        if distance <= limit, distance < best?.distance ?? .max { best = (candidate, distance) }
    }
    return best?.name
}

/// Damerau-Levenshtein distance (optimal string alignment): insertions, deletions,
/// substitutions and swaps of neighbours each cost 1.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
    var before = [Int](repeating: 0, count: b.count + 1)
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            let cost = a[i - 1] == b[j - 1] ? 0 : 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                current[j] = min(current[j], before[j - 2] + 1)
            }
        }
        (before, previous, current) = (previous, current, before)
    }
    return previous[b.count]
}
