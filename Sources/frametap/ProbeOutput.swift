import Bitstream
import FrameTapAPI
import VideoCoding

/// `frametap probe`'s text: the codec, the NAL unit table, each parameter set's facts, then
/// access units, keyframes and problems. The columns and facts are the codec's (`StreamDescription`).
struct ProbeText {
    let description: StreamDescription
    /// The codec was stated with `--codec`, not detected.
    let codecStated: Bool

    init(_ description: StreamDescription, codecStated: Bool) {
        self.description = description
        self.codecStated = codecStated
    }

    func text() -> String {
        var lines: [String] = []
        if let codec = description.codec {
            lines.append(
                "codec: \(codec.displayName) (\(Self.otherName(codec)))"
                    + (codecStated ? ", as --codec states" : ", detected from its first parameter set"))
        }
        lines.append("NAL units: \(description.nalUnits.count) in \(description.bytes) bytes")
        let widths = description.headerFields.map { $0.column.count + 1 }
        lines.append(
            pad("offset", 10) + pad("size", 9) + pad("type", 6)
                + zip(description.headerFields, widths).map { pad($0.column, $1) }.joined() + "name")
        for nal in description.nalUnits {
            lines.append(
                pad("\(nal.offset)", 10) + pad("\(nal.size)", 9) + pad("\(nal.type)", 6)
                    + zip(nal.header, widths).map { pad("\($0)", $1) }.joined() + nal.name)
        }
        lines.append("")
        for kind in description.parameterSetKinds {
            for set in description.parameterSets(kind) {
                let heading = "\(kind.abbreviation) id \(set.id) at \(set.offset)"
                    + (set.repeats > 0 ? " (repeated \(set.repeats) times)" : "")
                lines.append(heading + (set.summary.isEmpty ? ":" : ": " + set.summary.joined(separator: ", ")))
                for fact in set.facts { lines.append("  " + pad(fact.label, 15) + fact.text) }
            }
        }
        lines.append("")
        lines.append("access units: \(description.accessUnits) (\(description.pictures) with a picture)")
        // An IDR is the plain case; any other start point names its kind.
        let positions = description.keyframes.map { "#\($0.accessUnit)@\($0.offset)\($0.kind == "IDR" ? "" : " (\($0.kind))")" }
        lines.append("keyframes: \(positions.count)" + (positions.isEmpty ? "" : ": " + positions.joined(separator: ", ")))
        for problem in description.problems {
            lines.append("problem: \(problem.code) at \(problem.offset.map(String.init) ?? "?"): \(problem.message)")
        }
        return lines.joined(separator: "\n")
    }

    /// The name a codec also goes by, which users search for as often as its number.
    private static func otherName(_ codec: VideoCodec) -> String {
        switch codec {
        case .h264: "AVC"
        case .h265: "HEVC"
        }
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}

/// `frametap probe --json`: one document, keys sorted like every JSON FrameTap writes
/// (`WireJSON`); the codec is named as the API names it (`h264`, `h265`, with `codecStated` as in
/// a session's status), a parameter set's format is the API's (`StreamFormatJSON`).
struct ProbeJSON: Encodable {
    let description: StreamDescription
    let codecStated: Bool

    init(_ description: StreamDescription, codecStated: Bool) {
        self.description = description
        self.codecStated = codecStated
    }

    func text() throws -> String {
        String(decoding: try WireJSON.encoder(indented: true).encode(self), as: UTF8.self)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(description.codec?.rawValue, forKey: Key("codec"))
        try container.encode(codecStated, forKey: Key("codecStated"))
        try container.encode(description.bytes, forKey: Key("bytes"))
        try container.encode(
            description.nalUnits.map { NALUnitJSON(unit: $0, fields: description.headerFields) }, forKey: Key("nalUnits"))
        for kind in description.parameterSetKinds {
            try container.encode(description.parameterSets(kind).map(ParameterSetJSON.init), forKey: Key(Self.listKey(kind)))
        }
        try container.encode(description.accessUnits, forKey: Key("accessUnits"))
        try container.encode(description.pictures, forKey: Key("pictures"))
        try container.encode(description.keyframes.map(KeyframeJSON.init), forKey: Key("keyframes"))
        try container.encode(description.problems.map(ProblemJSON.init), forKey: Key("problems"))
    }

    static func listKey(_ kind: ParameterSetKey.Kind) -> String {
        switch kind {
        case .vps: "videoParameterSets"
        case .sps: "sequenceParameterSets"
        case .pps: "pictureParameterSets"
        }
    }

    /// The keys are the description's own.
    typealias Key = MemberName

    struct NALUnitJSON: Encodable {
        let unit: NALUnitDescription
        let fields: [NALHeaderField]

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(unit.offset, forKey: Key("offset"))
            try container.encode(unit.size, forKey: Key("size"))
            try container.encode(unit.type, forKey: Key("type"))
            try container.encode(unit.name, forKey: Key("name"))
            for (field, value) in zip(fields, unit.header) { try container.encode(value, forKey: Key(field.key)) }
        }
    }

    struct ParameterSetJSON: Encodable {
        let set: ParameterSetDescription

        init(_ set: ParameterSetDescription) { self.set = set }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(set.id, forKey: Key("id"))
            try container.encode(set.offset, forKey: Key("offset"))
            try container.encode(set.repeats, forKey: Key("repeats"))
            if let format = set.format { try container.encode(StreamFormatJSON(format), forKey: Key("format")) }
            for fact in set.fields {
                let key = Key(fact.key)
                switch fact.value {
                case .integer(let value): try container.encode(value, forKey: key)
                case .flag(let value): try container.encode(value, forKey: key)
                case .text(let value): try container.encode(value, forKey: key)
                case .number(let value): try container.encode(value, forKey: key)
                }
            }
        }
    }

    struct KeyframeJSON: WireObject {
        let keyframe: KeyframeDescription

        init(_ keyframe: KeyframeDescription) { self.keyframe = keyframe }

        var members: KeyValuePairs<String, any Encodable> {
            ["accessUnit": keyframe.accessUnit, "offset": keyframe.offset, "kind": keyframe.kind]
        }
    }

    /// `offset` is left out when unknown.
    struct ProblemJSON: SparseWireObject {
        let problem: ProbeProblem

        init(_ problem: ProbeProblem) { self.problem = problem }

        var members: KeyValuePairs<String, (any Encodable)?> {
            ["offset": problem.offset, "code": problem.code, "message": problem.message]
        }
    }
}
