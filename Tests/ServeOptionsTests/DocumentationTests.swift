import FoundationEssentials
import Testing

@testable import ServeOptions

/// README's table and `--help` come from the option table; these fail when README was not
/// regenerated after a row changed, or when the two renderings say different things.
/// `FRAMETAP_UPDATE_README=1 swift test --filter DocumentationTests` writes README's table anew.
@Suite("README and --help agree with the option table", .timeLimit(.minutes(10)))
struct DocumentationTests {
    static let readmePath = repositoryRoot + "/README.md"

    /// README's text between the generated table's markers.
    static func readmeTable(_ readme: String) throws -> (String, Range<String.Index>) {
        let start = try #require(readme.firstRange(of: OptionDocumentation.readmeStart), "README has no \(OptionDocumentation.readmeStart)")
        let end = try #require(readme.firstRange(of: OptionDocumentation.readmeEnd), "README has no \(OptionDocumentation.readmeEnd)")
        let range = start.upperBound..<end.lowerBound
        return (String(readme[range]).trimmingWhitespaceAndNewlines(), range)
    }

    @Test func readmeHoldsTheGeneratedTable() throws {
        var readme = try String(contentsOfFile: Self.readmePath, encoding: .utf8)
        let (table, range) = try Self.readmeTable(readme)
        let generated = OptionDocumentation.markdownTable()
        if table != generated, ProcessInfo.processInfo.environment["FRAMETAP_UPDATE_README"] == "1" {
            readme.replaceSubrange(range, with: "\n" + generated + "\n")
            try Data(readme.utf8).write(to: URL(fileURLWithPath: Self.readmePath))
            return
        }
        #expect(
            table == generated,
            "README's Configuration table differs from the option table: run FRAMETAP_UPDATE_README=1 swift test --filter DocumentationTests")
    }

    /// Each README row against `--help`'s entry for the same option: the same option, variable
    /// and default, and no option in one that is missing from the other.
    @Test func readmeAndHelpNameTheSameOptionsVariablesAndDefaults() throws {
        let readme = try String(contentsOfFile: Self.readmePath, encoding: .utf8)
        let (table, _) = try Self.readmeTable(readme)
        let help = OptionDocumentation.helpList()
        let helpEntries = Self.helpEntries(help)
        var readmeOptions: [String] = []
        for row in table.split(separator: "\n").dropFirst(2) {
            let cells = row.split(separator: "|", omittingEmptySubsequences: false).dropFirst().map {
                $0.trimmingWhitespaceAndNewlines()
            }
            let option = try #require(cells[0].split(separator: "`").first.map(String.init))
            readmeOptions.append(option)
            let entry = try #require(helpEntries[option], "\(option) is in README but not in --help")
            let variable = cells[1].replacing("`", with: "")
            if variable.hasPrefix("FRAMETAP_") {
                #expect(entry.contains("[\(variable);"), "--help does not name \(variable) for \(option)")
            } else {
                #expect(!entry.contains("[FRAMETAP_"), "--help names a variable for \(option), README none")
            }
            let shownDefault = cells[2].replacing("`", with: "")
            #expect(entry.contains("default: \(shownDefault)]"), "\(option): README's default '\(shownDefault)' is not --help's")
        }
        #expect(Set(readmeOptions) == Set(helpEntries.keys).subtracting(["-h, --help"]))
        #expect(readmeOptions == ServeOption.all.map(\.commandLineName))
    }

    /// `--help`'s entries by option, each entry's lines joined.
    static func helpEntries(_ help: String) -> [String: String] {
        var entries: [String: String] = [:]
        var current: String?
        for line in help.split(separator: "\n") {
            if line.hasPrefix("  -") {
                let name = line.hasPrefix("  -h,") ? "-h, --help" : String(line.dropFirst(2).prefix { $0 != " " })
                current = name
                entries[name] = String(line)
            } else if let current {
                entries[current, default: ""] += " " + line.trimmingWhitespaceAndNewlines()
            }
        }
        return entries
    }

    @Test func helpFitsEightyColumns() {
        for line in OptionDocumentation.helpList().split(separator: "\n") {
            #expect(line.count < 80, "too wide: \(line)")
        }
    }

    @Test func everyOptionIsDescribed() {
        var names: Set<String> = []
        for option in ServeOption.all {
            #expect(names.insert(option.name).inserted, "\(option.name) twice")
            #expect(!option.help.isEmpty)
            #expect(option.help.hasSuffix("."), "\(option.name)'s help is not a sentence")
            #expect(!option.defaultDescription.isEmpty)
        }
    }
}

extension StringProtocol {
    func trimmingWhitespaceAndNewlines() -> String {
        var slice = Substring(self)
        while let first = slice.first, first.isWhitespace { slice.removeFirst() }
        while let last = slice.last, last.isWhitespace { slice.removeLast() }
        return String(slice)
    }
}
