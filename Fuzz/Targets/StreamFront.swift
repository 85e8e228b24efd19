// libFuzzer target: the codec-neutral half of StreamDecoder, without libavcodec: the Annex B
// splitter, CodecDetector deciding the codec from the first parameter set (units held until
// then) or a stated codec, the codec's reader from Codecs.reader (access units, the
// random-access gate, parameter sets, live or emulating the ffmpeg CLI), ended early after every
// piece as StreamDecoder does; then StreamProbe (`frametap probe`) over the same bytes. Whatever
// the chunking, the reader's events and the probe's description are the same, and what they
// hand on is well-formed.

import Bitstream
import VideoCoding

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzStreamFront(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    var random = SplitMix64(seededBy: input, salt: 0x5F)
    let stated: VideoCodec? = [nil, nil, VideoCodec.h264, .h265][Int(random.next() % 4)]
    let emulateCLI = random.next() % 2 == 0
    // One input in four with a small cap (never below the prefix the assemblers need).
    let cap =
        random.next() % 4 == 0
        ? AnnexBSplitter.prefixLength + random.next(upTo: 600) : AnnexBSplitter.defaultMaxNALBytes
    let pieces = random.pieces(total: input.count)

    let whole = FrontRun(stated: stated, emulateCLI: emulateCLI, cap: cap)
    whole.read(input, pieces: [input.count], endEarly: false)
    let chunked = FrontRun(stated: stated, emulateCLI: emulateCLI, cap: cap)
    chunked.read(input, pieces: pieces, endEarly: true)
    require(
        chunked.events == whole.events,
        "the same reader events for pieces \(pieces) with early ends, codec \(stated.map { "\($0)" } ?? "detected"), "
            + "CLI emulation \(emulateCLI), cap \(cap): \(firstDifference(chunked.events, whole.events))")
    require(chunked.codec == whole.codec, "the same codec for any chunking")

    let units = AnnexBSplitter.split(input, maxNALBytes: cap)
    let described = describe(input, pieces: [input.count], codec: stated, cap: cap)
    checkDescription(described, units: units, stated: stated)
    let describedInPieces = describe(input, pieces: pieces, codec: stated, cap: cap)
    require(describedInPieces.nalUnits == described.nalUnits, "the probe lists the same units for any chunking")
    require(describedInPieces.parameterSets == described.parameterSets, "the same parameter sets for any chunking")
    require(
        describedInPieces.accessUnits == described.accessUnits && describedInPieces.keyframes == described.keyframes,
        "the same access units and keyframes for any chunking")
    require(describedInPieces.problems == described.problems, "the same problems for any chunking")
    if stated == nil { require(described.codec == whole.firstCodec, "the probe and the reader path detect the same codec") }
    return 0
}

/// Where two runs' events part, for the message of a broken invariant.
func firstDifference(_ chunked: [Event], _ whole: [Event]) -> String {
    let index = zip(chunked, whole).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(chunked.count, whole.count)
    func shown(_ events: [Event]) -> String { index < events.count ? String(String(describing: events[index]).prefix(600)) : "nothing" }
    return "\(chunked.count) events against \(whole.count); event \(index) is \(shown(chunked)) in pieces, \(shown(whole)) whole"
}

/// What a reader said, with every field compared.
enum Event: Equatable {
    case accessUnit(units: [[UInt8]], sets: [[UInt8]], keys: [ParameterSetKey], sequence: SequenceFacts, keyframe: Bool, intra: Bool)
    case droppedBeforeKeyframe(Int)
    case skippedLeading(Int)
    case skippedNotKeyframe(Int)
    case outsideBaseLayer(Int)
    case unreadableParameterSet(BitstreamError)
}

/// StreamDecoder's reading, minus the decoder: the codec stated or detected (units held until
/// a parameter set names it), the rest to the reader. Another codec's parameter set ends the
/// access unit under way, then starts a new stream of that codec if the codec was detected and
/// no picture came yet, or refuses the rest of the stream.
final class FrontRun {
    let stated: VideoCodec?
    let emulateCLI: Bool
    let cap: Int
    private(set) var codec: VideoCodec?
    /// The codec read first (the one a probe describes), before any new stream of another.
    private(set) var firstCodec: VideoCodec?
    private(set) var events: [Event] = []
    private var reader: (any AccessUnitReader)?
    private var held: [AnnexBUnit] = []
    private var judgedPictures = 0
    private var hasPictures = false
    private var refusing = false

    init(stated: VideoCodec?, emulateCLI: Bool, cap: Int) {
        self.stated = stated
        self.emulateCLI = emulateCLI
        self.cap = cap
        if let stated { start(stated) }
    }

    func read(_ input: [UInt8], pieces: [Int], endEarly: Bool) {
        var splitter = AnnexBSplitter(maxNALBytes: cap)
        var offset = 0
        for piece in pieces {
            var split: [SplitterEvent] = []
            splitter.push(Array(input[offset..<offset + piece])) { split.append($0) }
            offset += piece
            split.forEach(take)
            if endEarly, !refusing, let prefix = splitter.pendingUnitPrefix { endAccessUnit(ifEndedByUnitStarting: prefix) }
        }
        var split: [SplitterEvent] = []
        splitter.finish { split.append($0) }
        split.forEach(take)
        if var reader {
            reader.finish(record)
            self.reader = reader
            require(judgedPictures <= reader.accessUnitsAssembled, "at most one verdict per access unit assembled")
        }
    }

    private func start(_ codec: VideoCodec) {
        self.codec = codec
        if firstCodec == nil { firstCodec = codec }
        let reader = Codecs.reader(for: codec, emulateFFmpegProbe: emulateCLI)
        require(reader.codec == codec, "Codecs.reader gives the codec's own reader")
        self.reader = reader
        judgedPictures = 0
    }

    private func endAccessUnit(ifEndedByUnitStarting prefix: ArraySlice<UInt8>) {
        guard var reader, reader.nextUnitEndsAccessUnit(prefix: prefix) else { return }
        reader.endAccessUnit(record)
        self.reader = reader
    }

    private func take(_ event: SplitterEvent) {
        switch event {
        case .unit(let unit):
            guard !refusing else { return }
            let parameterSetCodec = CodecDetector.codec(ofParameterSet: unit)
            guard let codec else {
                guard let detected = parameterSetCodec else {
                    held.append(unit)
                    return
                }
                start(detected)
                let earlier = held
                held = []
                earlier.forEach(push)
                push(unit)
                return
            }
            if let other = parameterSetCodec, other != codec {
                if var reader {
                    reader.endAccessUnit(record)
                    self.reader = reader
                }
                guard stated != nil || hasPictures else {
                    start(other)
                    push(unit)
                    return
                }
                refusing = true  // codec_mismatch
                return
            }
            push(unit)
        case .dropped(_, let prefix):
            guard var reader else { return }
            reader.unitDropped(prefix: prefix, record)
            self.reader = reader
        }
    }

    private func push(_ unit: AnnexBUnit) {
        guard var reader else { return }
        require(!reader.typeName(of: unit).isEmpty, "every unit has a type name")
        reader.push(unit, record)
        self.reader = reader
    }

    private func record(_ event: ReaderEvent) {
        switch event {
        case .accessUnit(let unit):
            check(unit)
            judgedPictures += 1
            hasPictures = true
            events.append(
                .accessUnit(
                    units: unit.nalUnits.map { Array($0.bytes) }, sets: unit.parameterSets.map { Array($0.bytes) },
                    keys: unit.parameterSets.map(\.key), sequence: unit.sequence, keyframe: unit.isKeyframe,
                    intra: unit.isIntra))
        case .droppedBeforeKeyframe(let count):
            require(count > 0, "a drop counts pictures")
            judgedPictures += count
            events.append(.droppedBeforeKeyframe(count))
        case .skippedLeading(let count):
            require(count > 0, "a skip counts pictures")
            judgedPictures += count
            events.append(.skippedLeading(count))
        case .skippedNotKeyframe(let count):
            require(count > 0, "a skip counts pictures")
            judgedPictures += count
            events.append(.skippedNotKeyframe(count))
        case .outsideBaseLayer(let count):
            require(count > 0, "other layers are counted when there are some")
            events.append(.outsideBaseLayer(count))
        case .unreadableParameterSet(let error):
            require(error.message.contains("cannot be read"), "an unreadable parameter set says which")
            events.append(.unreadableParameterSet(error))
        }
    }

    /// An access unit as a decoder would get it.
    private func check(_ unit: CodedAccessUnit) {
        require(unit.codec == codec, "an access unit of the stream's codec")
        require(!unit.nalUnits.isEmpty && unit.nalUnits.allSatisfy { !$0.bytes.isEmpty }, "an access unit has units")
        let kinds: [ParameterSetKey.Kind] = codec == .h265 ? [.vps, .sps, .pps] : [.sps, .pps]
        require(unit.parameterSets.map(\.key.kind) == kinds, "its parameter sets, in the order a decoder needs them")
        for set in unit.parameterSets where set.carriedByAccessUnit {
            require(unit.nalUnits.contains { $0.bytes == set.bytes }, "a set said to be carried is in the access unit")
        }
        let format = unit.sequence.format
        require(format.codec == codec, "the sequence is of the stream's codec")
        require(format.width > 0 && format.height > 0, "a picture has a size")
        require(
            format.width + format.crop.left + format.crop.right == format.codedWidth
                && format.height + format.crop.top + format.crop.bottom == format.codedHeight,
            "the crop lies inside the coded picture")
        require((8...16).contains(format.bitDepth) && (8...16).contains(format.bitDepthChroma), "bit depths 8 to 16")
        require((1...16).contains(unit.sequence.bufferedPictures), "1 to 16 pictures buffered")
        if codec == .h265 && unit.isKeyframe && !unit.isIntra {
            // Not an IRAP: a recovery point, which its prefix SEI says.
            require(unit.nalUnits.contains { $0.bytes[0] >> 1 & 0x3F == 39 }, "an H.265 keyframe is intra or a recovery point")
        }
    }
}

func describe(_ input: [UInt8], pieces: [Int], codec: VideoCodec?, cap: Int) -> StreamDescription {
    var probe = StreamProbe(codec: codec, maxNALBytes: cap)
    var offset = 0
    for piece in pieces {
        probe.push(Array(input[offset..<offset + piece]))
        offset += piece
    }
    return probe.finish()
}

/// A description lists every unit once the codec is known, in stream order, and counts them
/// otherwise; its access units, keyframes and parameter sets hold together.
func checkDescription(_ description: StreamDescription, units: [AnnexBUnit], stated: VideoCodec?) {
    if let stated { require(description.codec == stated, "a stated codec is the one described") }
    guard let codec = description.codec else {
        require(description.nalUnits.isEmpty, "nothing is described without a codec")
        require(description.unitsOfUnknownCodec == units.count, "every unit is counted without a codec")
        return
    }
    require(description.nalUnits.map(\.offset) == units.map(\.streamOffset), "every unit listed, at its offset")
    require(description.nalUnits.map(\.size) == units.map(\.bytes.count), "every unit listed with its size")
    require(
        description.nalUnits.allSatisfy { $0.header.count == description.headerFields.count && (0...63).contains($0.type) },
        "every unit has the codec's header fields")
    require(description.parameterSetKinds == (codec == .h265 ? [.vps, .sps, .pps] : [.sps, .pps]), "the codec's kinds")
    for set in description.parameterSets {
        require(description.parameterSetKinds.contains(set.kind), "a parameter set of the codec's kinds")
        require((set.kind == .sps) == (set.format != nil), "an SPS and only an SPS describes pictures")
        require(set.summary.isEmpty != set.facts.isEmpty, "a set is shown on one line or as facts")
    }
    require(description.pictures <= description.accessUnits, "pictures are access units")
    require(
        zip(description.keyframes, description.keyframes.dropFirst()).allSatisfy { $0.accessUnit < $1.accessUnit }
            && description.keyframes.allSatisfy { $0.accessUnit < description.accessUnits },
        "keyframes are access units, in order")
}
