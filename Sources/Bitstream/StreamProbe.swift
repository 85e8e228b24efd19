import VideoCoding

/// Describes a stream without decoding it (`frametap probe`): bytes in, in any chunking, a
/// `StreamDescription` out. The codec is the stated one, or the one whose parameter set comes
/// first (`CodecDetector`), as `StreamDecoder` reads streams; each codec then describes its own
/// units, parameter sets and access units.
public struct StreamProbe {
    /// Units held while no codec is known: the first parameter set says how to read them.
    /// Past this many bytes the oldest are kept only as far as the NAL table needs them (where
    /// they are and their header), so probing a long stream without parameter sets stays bounded.
    public static let maxHeldBytes = 8 << 20

    private enum Held {
        case unit(AnnexBUnit)
        /// Too many bytes were held: only what the NAL table shows of it.
        case listedOnly(offset: Int, size: Int, header: [UInt8])
        case dropped(BitstreamError, prefix: ArraySlice<UInt8>)
    }

    private var splitter: AnnexBSplitter
    private var description = StreamDescription()
    private var describer: (any CodecDescriber)?
    private let codecIsStated: Bool
    private var held: [Held] = []
    private var heldBytes = 0
    private var listedOnly = (units: 0, bytes: 0)
    private var mismatchReported = false

    /// `codec`: the stream's codec when the caller knows it; nil to detect it.
    public init(codec: VideoCodec? = nil, maxNALBytes: Int = AnnexBSplitter.defaultMaxNALBytes) {
        splitter = AnnexBSplitter(maxNALBytes: maxNALBytes)
        codecIsStated = codec != nil
        if let codec { start(codec) }
    }

    public mutating func push(_ bytes: UnsafeRawBufferPointer) {
        description.bytes += bytes.count
        var events: [SplitterEvent] = []
        splitter.push(bytes) { events.append($0) }
        for event in events { take(event) }
    }

    public mutating func push(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { push($0) }
    }

    /// End of the stream: the last access unit, and the description.
    public mutating func finish() -> StreamDescription {
        var events: [SplitterEvent] = []
        splitter.finish { events.append($0) }
        for event in events { take(event) }
        if var describer {
            describer.finish(into: &description)
            self.describer = describer
        } else {
            description.unitsOfUnknownCodec = held.count(where: {
                if case .dropped = $0 { false } else { true }
            })
            held = []
            heldBytes = 0
        }
        return description
    }

    private mutating func take(_ event: SplitterEvent) {
        guard describer == nil else {
            describe(event)
            return
        }
        switch event {
        case .unit(let unit):
            guard let codec = CodecDetector.codec(ofParameterSet: unit) else {
                hold(unit)
                return
            }
            start(codec)
            release()
            describe(event)
        case .dropped(let error, let prefix):
            held.append(.dropped(error, prefix: prefix))
        }
    }

    private mutating func start(_ codec: VideoCodec) {
        let describer: any CodecDescriber =
            switch codec {
            case .h264: H264Describer()
            case .h265: H265Describer()
            }
        description.codec = codec
        description.headerFields = type(of: describer).headerFields
        description.parameterSetKinds = type(of: describer).parameterSetKinds
        self.describer = describer
    }

    private mutating func describe(_ event: SplitterEvent) {
        guard var describer else { return }
        switch event {
        case .unit(let unit):
            if let other = CodecDetector.codec(ofParameterSet: unit), other != describer.codec {
                reportMismatch(other, at: unit.streamOffset)
            }
            describer.push(unit, into: &description)
        case .dropped(let error, let prefix):
            description.problems.append(ProbeProblem(offset: nil, code: error.code.rawValue, message: error.message))
            describer.unitDropped(prefix: prefix, into: &description)
        }
        self.describer = describer
    }

    /// A parameter set of the other codec: `StreamDecoder` refuses such bytes (`codec_mismatch`).
    private mutating func reportMismatch(_ other: VideoCodec, at offset: Int) {
        guard !mismatchReported, let codec = description.codec else { return }
        mismatchReported = true
        description.problems.append(
            ProbeProblem(
                offset: offset, code: "codec_mismatch",
                message: "an \(other.displayName) parameter set in a stream read as \(codec.displayName) "
                    + "(\(codecIsStated ? "stated" : "detected")); a decoder refuses it"))
    }

    private mutating func hold(_ unit: AnnexBUnit) {
        held.append(.unit(unit))
        heldBytes += unit.bytes.count
        var index = 0
        while heldBytes > Self.maxHeldBytes, index < held.count {
            if case .unit(let old) = held[index] {
                held[index] = .listedOnly(offset: old.streamOffset, size: old.bytes.count, header: Array(old.bytes.prefix(2)))
                heldBytes -= old.bytes.count
                listedOnly.units += 1
                listedOnly.bytes += old.bytes.count
            }
            index += 1
        }
    }

    /// The codec is known: what was held is described as it came.
    private mutating func release() {
        let units = held
        held = []
        heldBytes = 0
        for entry in units {
            switch entry {
            case .unit(let unit): describe(.unit(unit))
            case .dropped(let error, let prefix): describe(.dropped(error, prefix: prefix))
            case .listedOnly(let offset, let size, let header):
                describer?.list(offset: offset, size: size, header: header, into: &description)
            }
        }
        if listedOnly.units > 0 {
            description.problems.append(
                ProbeProblem(
                    offset: nil, code: BitstreamError.Code.invalidData.rawValue,
                    message: "\(listedOnly.units) NAL units (\(listedOnly.bytes) bytes) before the first parameter set "
                        + "are listed but not assembled into access units: more than \(Self.maxHeldBytes) bytes "
                        + "came before it"))
        }
    }
}

/// One codec's side of `StreamProbe`.
protocol CodecDescriber {
    var codec: VideoCodec { get }
    static var headerFields: [NALHeaderField] { get }
    static var parameterSetKinds: [ParameterSetKey.Kind] { get }

    /// Lists the unit, describes it if it is a parameter set, and assembles it.
    mutating func push(_ unit: AnnexBUnit, into description: inout StreamDescription)
    /// Lists a unit of which only its place, size and first bytes are known.
    func list(offset: Int, size: Int, header: [UInt8], into description: inout StreamDescription)
    mutating func unitDropped(prefix: ArraySlice<UInt8>, into description: inout StreamDescription)
    mutating func finish(into description: inout StreamDescription)
}

extension StreamDescription {
    /// Records a parameter set, or counts it as a repeat when the newest set of its kind and id
    /// has the same bytes. `newest` maps each kind and id to those bytes and their record.
    mutating func record(
        _ set: ParameterSetDescription, bytes: [UInt8],
        newest: inout [ParameterSetKey: (bytes: [UInt8], record: Int)]
    ) {
        let key = ParameterSetKey(set.kind, set.id)
        if let last = newest[key], last.bytes == bytes {
            parameterSets[last.record].repeats += 1
            return
        }
        newest[key] = (bytes, parameterSets.count)
        parameterSets.append(set)
    }

    /// Records what reading a unit as a parameter set gave: its description (none when the unit
    /// is no parameter set), or why it could not be read.
    mutating func record(
        _ described: Result<ParameterSetDescription?, BitstreamError>, bytes: [UInt8], at offset: Int,
        newest: inout [ParameterSetKey: (bytes: [UInt8], record: Int)]
    ) {
        switch described {
        case .success(let set?): record(set, bytes: bytes, newest: &newest)
        case .success(nil): break
        case .failure(let error): record(error, at: offset)
        }
    }

    /// Counts an access unit; one with a picture that decoding can start from is a keyframe of `kind`.
    mutating func recordAccessUnit(hasPicture: Bool, keyframe kind: String?, offset: Int) {
        defer { accessUnits += 1 }
        guard hasPicture else { return }
        pictures += 1
        if let kind { keyframes.append(KeyframeDescription(accessUnit: accessUnits, offset: offset, kind: kind)) }
    }

    mutating func record(_ error: BitstreamError, at offset: Int?) {
        problems.append(ProbeProblem(offset: offset, code: error.code.rawValue, message: error.message))
    }
}
