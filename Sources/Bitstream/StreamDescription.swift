import VideoCoding

/// What `frametap probe` shows of a stream, whatever its codec: its NAL units by their codec's
/// type names, each parameter set as a list of facts, its access units and keyframes, and what
/// could not be read. Each codec fills it in (`StreamProbe`); the command line only lays it out,
/// as text or as JSON, and never looks at a codec's own types. Its rows (NAL units, header
/// fields, keyframes, problems) are made in this module only, so their initialisers are internal.
public struct StreamDescription: Sendable {
    /// Stated by the caller, or detected from the first parameter set; nil when neither.
    public var codec: VideoCodec?
    /// Bytes read.
    public var bytes = 0
    /// The header fields of this codec's NAL units after the type (`NALUnitDescription.header`).
    public var headerFields: [NALHeaderField] = []
    public var nalUnits: [NALUnitDescription] = []
    /// The kinds of parameter set this codec has, in the order a decoder needs them (H.264: SPS,
    /// PPS; H.265: VPS, SPS, PPS).
    public var parameterSetKinds: [ParameterSetKey.Kind] = []
    /// Every distinct parameter set, in stream order (identical repeats fold into one).
    public var parameterSets: [ParameterSetDescription] = []
    /// Access units assembled, with or without a picture.
    public var accessUnits = 0
    /// Access units with a picture.
    public var pictures = 0
    public var keyframes: [KeyframeDescription] = []
    public var problems: [ProbeProblem] = []
    /// NAL units that were never described because no codec was known: the stream had neither
    /// codec's parameter set and none was stated.
    public var unitsOfUnknownCodec = 0

    public init() {}

    /// The parameter sets of one kind, in stream order.
    public func parameterSets(_ kind: ParameterSetKey.Kind) -> [ParameterSetDescription] {
        parameterSets.filter { $0.kind == kind }
    }
}

/// One NAL unit as the splitter found it.
public struct NALUnitDescription: Sendable, Equatable {
    /// Of its first header byte in the stream.
    public var offset: Int
    /// Its bytes after the start code, header included.
    public var size: Int
    /// nal_unit_type.
    public var type: Int
    /// The type's name (as counters and `AccessUnitReader.typeName` name it).
    public var name: String
    /// The header fields after the type, in `StreamDescription.headerFields` order.
    public var header: [Int]
}

/// A NAL header field other than the type: a column of the text table and a JSON key.
public struct NALHeaderField: Sendable, Equatable {
    /// The text table's column heading ("ref", "layer", "tid").
    public var column: String
    /// The JSON key ("refIdc", "layerId", "temporalId").
    public var key: String
}

/// One parameter set (VPS, SPS or PPS) and what it says, for people and for programs.
public struct ParameterSetDescription: Sendable, Equatable {
    public var kind: ParameterSetKey.Kind
    public var id: Int
    /// Of its first appearance.
    public var offset: Int
    /// Later units with the same id and identical bytes (streams often repeat parameter sets).
    public var repeats = 0
    /// The pictures it describes (an SPS).
    public var format: StreamFormat?
    /// A short set's facts, shown on one line after its heading ("SPS 0", "CABAC", ...).
    public var summary: [String]
    /// A long set's facts, one line each under its heading.
    public var facts: [LabelledFact]
    /// What `probe --json` shows besides `id`, `offset`, `repeats` and `format`.
    public var fields: [KeyedFact]

    public init(
        kind: ParameterSetKey.Kind, id: Int, offset: Int, format: StreamFormat? = nil, summary: [String] = [],
        facts: [LabelledFact] = [], fields: [KeyedFact]
    ) {
        self.kind = kind
        self.id = id
        self.offset = offset
        self.format = format
        self.summary = summary
        self.facts = facts
        self.fields = fields
    }
}

extension ParameterSetKey.Kind {
    /// "VPS", "SPS", "PPS".
    public var abbreviation: String {
        switch self {
        case .vps: "VPS"
        case .sps: "SPS"
        case .pps: "PPS"
        }
    }
}

/// A fact for people: "coded size" → "328x248".
public struct LabelledFact: Sendable, Equatable {
    public var label: String
    public var text: String

    public init(_ label: String, _ text: String) {
        self.label = label
        self.text = text
    }
}

/// A fact for programs: a JSON key and its value.
public struct KeyedFact: Sendable, Equatable {
    public enum Value: Sendable, Equatable {
        case integer(Int)
        case flag(Bool)
        case text(String)
        case number(Double)
    }

    public var key: String
    public var value: Value

    public init(_ key: String, _ value: Value) {
        self.key = key
        self.value = value
    }
}

/// An access unit decoding can start from.
public struct KeyframeDescription: Sendable, Equatable {
    /// Its index among all access units.
    public var accessUnit: Int
    public var offset: Int
    /// "IDR"; "recovery point" (a recovery point SEI); H.265 "CRA", "BLA" or "IRAP" (a reserved
    /// IRAP type).
    public var kind: String
}

/// Something of the stream that could not be read.
public struct ProbeProblem: Sendable, Equatable {
    /// In the stream, when known.
    public var offset: Int?
    /// A stable code (`BitstreamError.Code`, or `codec_mismatch`).
    public var code: String
    public var message: String
}
