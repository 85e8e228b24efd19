import Bitstream
import FoundationEssentials
import VideoCoding

/// One access unit as ingest hands it on: the reader's unit and its place in the stream.
public struct IndexedAccessUnit: Sendable {
    /// Its position in decoding order among every access unit ingest has handed on (for a
    /// session: since it was created, across pushes, streams and decoders), from 0. A picture
    /// number is made from it (`PictureNumbering`), so it is never reused.
    public let index: Int64
    public let unit: CodedAccessUnit
    /// Its presentation time, when the container or source it came in gave one (an Annex B
    /// push has none), in the samples' time base (`DemuxedSample.ptsPerSecond`). It goes through
    /// the decoder with its picture (`DecodedFrame.pts`).
    public let pts: Int64?

    public init(index: Int64, unit: CodedAccessUnit, pts: Int64? = nil) {
        self.index = index
        self.unit = unit
        self.pts = pts
    }
}

/// The first half of `StreamDecoder`, which needs no decoder: bytes in, access units out.
///
/// 1. split: `AnnexBSplitter` cuts NAL units out of bytes in any chunking;
/// 2. which codec: stated, or detected from the stream's first parameter set (`CodecDetector`);
///    a parameter set of another codec in a stream whose codec is known is `codec_mismatch`;
/// 3. read: the codec's `AccessUnitReader` assembles access units, tracks the parameter sets
///    and judges each at the random-access gate (nothing before a point decoding can start
///    from; H.265 RASL pictures of that point skipped; keyframes-only mode).
///
/// A session runs this on every byte whether or not a decoder runs (on-demand sessions keep
/// the access units it hands on as compressed history, see `AccessUnitDecoder` for the rest).
///
/// Not thread-safe: owned by one worker.
public final class AccessUnitIngest {
    /// Counts of what was read: bytes, NAL units, access units, pictures dropped or skipped
    /// before decoding, and the errors of the input (the decoding counts stay zero here).
    public private(set) var counters = StreamDecoder.Counters()
    public private(set) var lastError: DecodeError?
    /// From the sequence of the last access unit handed on.
    public private(set) var format: StreamFormat?
    /// Hand on only intra pictures (IDR/IRAP or I); can be switched between pushes.
    public var keyframesOnly: Bool {
        didSet { reader?.keyframesOnly = keyframesOnly }
    }
    /// The codec being read: stated by the caller, or detected from the stream's first
    /// parameter set; nil until then.
    public private(set) var codec: VideoCodec?
    /// The caller said which codec the stream is: a parameter set of another is a mismatch.
    public let codecIsStated: Bool
    /// The index the next access unit gets. A replacement ingest (a session's new back end or
    /// codec, between streams) is set to go on from its predecessor's, so no index repeats.
    public var nextIndex: Int64

    /// Units held while no codec is known (at most `maxUndetectedBytes`).
    static let maxUndetectedBytes = 8 << 20

    private var splitter: AnnexBSplitter
    /// Where a container's samples land, one after another in the pool's slabs.
    private var sampleLanding = SlabWriter()
    /// What the splitter reported during one push, handled after it; reused.
    private var events: [SplitterEvent] = []
    private let emulateFFmpegProbe: Bool
    /// A session's stream (`Codecs.reader(for:emulateFFmpegProbe:live:)`).
    private let live: Bool
    /// Where the current stream began, for the end-of-stream check of unsplittable input.
    private var bytesAtStreamStart = 0
    private var unitsAtStreamStart = 0
    private var discardedBytesReported = 0
    private var reader: (any AccessUnitReader)?
    private var accessUnitsReported = 0
    /// Units waiting for the codec to be known, and their bytes.
    private var undetected: [AnnexBUnit] = []
    private var undetectedBytes = 0
    private var unknownCodecReported = false
    /// What the current push says it carries (`beginPush(saying:)`); nil when it says nothing.
    private var pushSays: VideoCodec?
    /// The codec the units being read are taken to be while the stream's is unknown: what the
    /// push says, or the codec of the sample description in use.
    private var pushCodec: VideoCodec?
    /// The current stream handed on a picture: a detected codec no longer changes in it.
    private var streamHasPictures = false
    /// Units of the current stream in layers above the base layer (SVC, MVC, H.265's), which
    /// are not decoded.
    private var streamUnitsOutsideBaseLayer = 0
    /// The current stream had a picture of the base layer, decoded or not (one dropped before a
    /// keyframe, or skipped, is still the base layer's).
    private var streamHasBaseLayerPicture = false
    /// Pictures of the current stream dropped while no keyframe had come.
    private var streamDroppedBeforeKeyframe = 0
    /// The current stream reached a point decoding can start from: a picture was handed on, or
    /// skipped after such a point (keyframes-only mode, leading pictures).
    private var streamReachedStartPoint = false
    /// An error of the current stream's input was already reported (an unreadable SPS, ...): a
    /// stream that decodes nothing is not also reported `no_decodable_picture`.
    private var streamHadError = false
    /// What of the rest of the push is refused, until `abandonIncompleteAccessUnit` or a new
    /// sample description.
    private enum PushRefusal {
        case none
        /// After a codec mismatch: none of its units reaches a decoder.
        case units
        /// It is length-prefixed: its bytes are not even split (units made up inside them would
        /// count as the stream's and hide the next such push).
        case bytes
    }

    private var pushRefusal = PushRefusal.none
    /// Where access units go during a `push` or `finish` (set only for the call's duration); what
    /// it returns are errors of the decoding, kept in order with the input's own.
    private var unitHandler: ((IndexedAccessUnit) -> [DecodeError])?
    /// The presentation time of the sample being read, for the access unit it ends.
    private var samplePTS: Int64?
    /// The sample description of a container's samples being pushed, and its converter. Nil
    /// after a stream's end or an Annex B push: the next sample gives its description's
    /// parameter sets to the reader again, whatever came in between.
    private var samples: SampleConverter?
    /// A description whose configuration could not be read (reported once; its samples are left out).
    private var unreadableDescription: SampleDescription?

    /// `codec`: the stream's codec when the caller knows it; nil to detect it from the stream.
    /// `firstIndex`: the index of the first access unit (a session's replacement ingest goes
    /// on from its predecessor's `nextIndex`).
    public init(
        maxNALBytes: Int = AnnexBSplitter.defaultMaxNALBytes, keyframesOnly: Bool = false, codec: VideoCodec? = nil,
        emulateFFmpegProbe: Bool = false, live: Bool = false, firstIndex: Int64 = 0
    ) throws(DecodeError) {
        guard maxNALBytes > 0 else { throw DecodeError(.invalidOptions, "maxNALBytes must be positive") }
        splitter = AnnexBSplitter(maxNALBytes: maxNALBytes)
        self.keyframesOnly = keyframesOnly
        self.emulateFFmpegProbe = emulateFFmpegProbe
        self.live = live
        codecIsStated = codec != nil
        nextIndex = firstIndex
        if let codec { read(codec) }
    }

    /// The stream offset the next pushed byte will have (`AnnexBUnit.streamOffset`).
    public var nextStreamOffset: Int { splitter.nextStreamOffset }

    /// Reads the next bytes of the stream, in any chunking; each access unit they complete goes
    /// to `onAccessUnit` at once, in decoding order. Returns the errors, the ones `onAccessUnit`
    /// returned among them in their place.
    public func push(
        _ bytes: UnsafeRawBufferPointer, onAccessUnit: (IndexedAccessUnit) -> [DecodeError]
    ) -> [DecodeError] {
        // Its parameter sets may replace the description's (the same ids, other contents).
        forgetSampleDescription()
        return handingOut(to: onAccessUnit) { errors in
            if consumeIfLengthPrefixed(bytes, into: &errors) { return }
            split(count: bytes.count, into: &errors) { splitter, collect in splitter.push(bytes, collect) }
        }
    }

    /// `push(_:onAccessUnit:)` of bytes that landed in a slab already (an upload's): the units
    /// they hold are regions of that slab, not copies.
    public func push(
        _ bytes: SlabBytes, onAccessUnit: (IndexedAccessUnit) -> [DecodeError]
    ) -> [DecodeError] {
        forgetSampleDescription()
        return handingOut(to: onAccessUnit) { errors in
            if bytes.withUnsafeBytes({ consumeIfLengthPrefixed($0, into: &errors) }) { return }
            split(count: bytes.count, into: &errors) { splitter, collect in splitter.push(bytes, collect) }
        }
    }

    /// Bytes of an Annex B stream through the splitter, in any chunking.
    private func split(
        count: Int, into errors: inout [DecodeError],
        _ push: (inout AnnexBSplitter, (SplitterEvent) -> Void) -> Void
    ) {
        counters.bytes += count
        // Events are collected first and handled after the call: handling them touches other
        // state of this object, which must not happen while `splitter` is being mutated.
        events.removeAll(keepingCapacity: true)
        push(&splitter) { events.append($0) }
        for event in events { handle(event, into: &errors) }
        events.removeAll(keepingCapacity: true)
        endAccessUnitEarly(into: &errors)
    }

    /// Reads one sample of a container's video track (`push(sample:)` of a demuxer's output). Its
    /// NAL units go to the codec's reader as the splitter's would, after the parameter sets of
    /// its description whenever the description is new. A sample that is a whole access unit
    /// ends it: it goes on now, not when the next sample starts (for a camera, one picture
    /// interval sooner). Samples that are pieces of an Annex B stream (RTP) go through the
    /// splitter like pushed bytes. Returns the errors: a sample whose units cannot be read (a
    /// length running past its end) is left out and counted as `invalid_data`.
    public func push(
        sample: UnsafeRawBufferPointer, described description: SampleDescription, pts: Int64? = nil,
        onAccessUnit: (IndexedAccessUnit) -> [DecodeError]
    ) -> [DecodeError] {
        handingOut(to: onAccessUnit) { errors in
            if let said = pushSays, said != description.codec {
                refuse(
                    "this push says it is \(said.displayName) (its codec parameter) but its container's video track is "
                        + "\(description.codec.displayName); nothing of it was decoded", into: &errors)
            }
            guard pushRefusal == .none else { return }
            if samples?.description != description && unreadableDescription != description {
                adopt(description, into: &errors)
            }
            guard description.samplesAreAccessUnits else {
                return split(count: sample.count, into: &errors) { splitter, collect in splitter.push(sample, collect) }
            }
            // A unit an Annex B push left open ends where this sample begins.
            completeSplitterUnit(into: &errors)
            let offset = counters.bytes
            counters.bytes += sample.count
            // Not bytes without a start code: the end-of-stream check of unsplittable input skips them.
            bytesAtStreamStart += sample.count
            guard let converter = samples else { return }
            let units: [AnnexBUnit]
            do throws(BitstreamError) {
                units = try converter.units(of: sample, streamOffset: offset, landing: &sampleLanding)
            } catch {
                record(DecodeError(error), in: &errors)
                return
            }
            // The time is the sample's: only the access unit it ends takes it.
            samplePTS = pts
            defer { samplePTS = nil }
            for unit in units { handle(unit, into: &errors) }
            guard pushRefusal == .none else { return }
            endAccessUnit(into: &errors)
        }
    }

    /// A new sample description: its codec is what the samples carry (a known codec's parameter
    /// sets must then match), and its parameter sets go to the reader.
    private func adopt(_ description: SampleDescription, into errors: inout [DecodeError]) {
        do throws(BitstreamError) {
            let converter = try SampleConverter(description, maxNALBytes: splitter.maxNALBytes)
            samples = converter
            unreadableDescription = nil
            pushCodec = description.codec
            completeSplitterUnit(into: &errors)
            for unit in converter.parameterSets { handle(unit, into: &errors) }
        } catch {
            samples = nil
            unreadableDescription = description
            record(
                DecodeError(
                    error.code == .invalidArgument ? .invalidData : DecodeError.Code(error.code),
                    "the \(description.codec.displayName) track's configuration cannot be read: \(error.message)"),
                in: &errors)
        }
    }

    /// Emits the unit the splitter holds (its end would otherwise come with the next start code).
    private func completeSplitterUnit(into errors: inout [DecodeError]) {
        guard splitter.hasPendingUnit else { return }
        var events: [SplitterEvent] = []
        splitter.finish { events.append($0) }
        for event in events { handle(event, into: &errors) }
    }

    /// End of stream: hands on what is still buffered and gets ready for a new stream (which
    /// must start at a random access point again; with a detected codec, it may be another
    /// codec). Parameter sets stay known. The caller drains its decoder after this.
    public func finish(onAccessUnit: (IndexedAccessUnit) -> [DecodeError]) -> [DecodeError] {
        handingOut(to: onAccessUnit) { errors in
            var events: [SplitterEvent] = []
            splitter.finish { events.append($0) }
            for event in events { handle(event, into: &errors) }
            reportUnsplittableBytes(into: &errors)
            reader?.finish { report($0, into: &errors) }
            reportUnknownCodec(into: &errors)
            reportOnlyOtherLayers(into: &errors)
            reportNoStartingPoint(into: &errors)
            countAccessUnits()
            streamHasPictures = false
            streamUnitsOutsideBaseLayer = 0
            streamHasBaseLayerPicture = false
            streamDroppedBeforeKeyframe = 0
            streamReachedStartPoint = false
            streamHadError = false
            pushRefusal = .none
            forgetSampleDescription()
        }
    }

    private func forgetSampleDescription() {
        samples = nil
        unreadableDescription = nil
    }

    /// A push begins; `codec` is what it says it carries (its `?codec=` or Content-Type), nil
    /// when it says nothing. While the stream's codec is unknown, the push is read as that codec;
    /// a parameter set of another codec in it contradicts the push itself and is
    /// `codec_mismatch`, like one that contradicts the stream's codec.
    public func beginPush(saying codec: VideoCodec?) {
        pushSays = codec
        pushCodec = codec
    }

    /// A push ended without ending the stream. Bytes it sent that belong to no NAL unit (none
    /// of its bytes had a start code before them) were skipped: that is an error of this push
    /// now, not only at the stream's end, so a push of nothing but garbage is not answered as
    /// if all were well.
    public func endPush() -> [DecodeError] {
        var errors: [DecodeError] = []
        let discarded = splitter.skippedBytes - discardedBytesReported
        if discarded > 0 {
            discardedBytesReported = splitter.skippedBytes
            record(
                DecodeError(.invalidData, "\(discarded) bytes that belong to no NAL unit (no start code before them) were skipped"),
                in: &errors)
        }
        return errors
    }

    /// A push broke off or was refused: the NAL unit it was sending is cut short, and so is the
    /// access unit it belonged to. Dropping both keeps the next push's first start code from
    /// closing the unit as if it were whole, and its first picture from being decoded as the
    /// end of the broken one (a damaged extra picture, every later number one higher). A push
    /// that resumes at an access unit boundary (after `counters.accessUnits` units) then
    /// decodes exactly. Parameter sets stay. Units held while the codec was unknown go too: none
    /// of them was counted, so the client resends them.
    public func abandonIncompleteAccessUnit() {
        splitter.abandonIncompleteUnit()
        reader?.abandonAccessUnit()
        undetected = []
        undetectedBytes = 0
        // What the broken or refused push made the splitter drop (the cut unit, bytes before its
        // first start code) is that push's, which was answered for it (`upload_aborted`, the
        // refusal): no damage for the push that ends the stream to be answered with.
        discardedBytesReported = splitter.discardedBytes
        pushRefusal = .none
    }

    private func handingOut(
        to onAccessUnit: (IndexedAccessUnit) -> [DecodeError], _ body: (inout [DecodeError]) -> Void
    ) -> [DecodeError] {
        withoutActuallyEscaping(onAccessUnit) { onAccessUnit in
            unitHandler = onAccessUnit
            defer { unitHandler = nil }
            var errors: [DecodeError] = []
            body(&errors)
            countAccessUnits()
            return errors
        }
    }

    // MARK: - 1, 2: split, and which codec

    private func handle(_ event: SplitterEvent, into errors: inout [DecodeError]) {
        switch event {
        case .unit(let unit):
            handle(unit, into: &errors)
        case .dropped(let error, let prefix):
            record(DecodeError(error), in: &errors)
            reader?.unitDropped(prefix: prefix) { report($0, into: &errors) }
        }
    }

    private func handle(_ unit: AnnexBUnit, into errors: inout [DecodeError]) {
        guard pushRefusal == .none else { return }
        let parameterSetCodec = CodecDetector.codec(ofParameterSet: unit)
        if let said = pushCodec, let other = parameterSetCodec, other != said {
            endAccessUnit(into: &errors)
            let claim = pushSays == said
                ? "this push says it is \(said.displayName) (its codec parameter or Content-Type)"
                : "the container's video track is \(said.displayName)"
            refuse(
                "\(claim) but carries \(other.displayName) parameter sets; the push is refused from there on",
                into: &errors)
            return
        }
        guard let codec else {
            guard let detected = parameterSetCodec ?? pushCodec else {
                holdUndetected(unit, into: &errors)
                return
            }
            read(detected)
            let held = undetected
            undetected = []
            undetectedBytes = 0
            for unit in held { read(unit, into: &errors) }
            read(unit, into: &errors)
            return
        }
        if let other = parameterSetCodec, other != codec {
            endAccessUnit(into: &errors)
            guard codecIsStated || streamHasPictures else {
                // A new stream of another codec, before any picture of it: read it as that.
                read(other)
                read(unit, into: &errors)
                return
            }
            if pushRefusal == .none { pushRefusal = .units }
            let why = codecIsStated ? "stated" : "detected"
            record(
                DecodeError(
                    .codecMismatch,
                    "this push carries \(other.displayName) parameter sets, but the session's stream is "
                        + "\(codec.displayName) (\(why)); the push is refused from there on"),
                in: &errors)
            return
        }
        read(unit, into: &errors)
    }

    /// Starts reading the stream as `codec`.
    private func read(_ codec: VideoCodec) {
        countAccessUnits()
        self.codec = codec
        var reader = Codecs.reader(for: codec, emulateFFmpegProbe: emulateFFmpegProbe, live: live)
        reader.keyframesOnly = keyframesOnly
        self.reader = reader
        accessUnitsReported = 0
    }

    private func read(_ unit: AnnexBUnit, into errors: inout [DecodeError]) {
        guard var reader else { return }
        counters.nalUnits[reader.typeName(of: unit), default: 0] += 1
        self.reader = nil  // the reader's events touch this object's state while it reads
        reader.push(unit) { report($0, into: &errors) }
        self.reader = reader
    }

    /// Holds a unit until a parameter set tells the codec; past the bound the oldest go.
    private func holdUndetected(_ unit: AnnexBUnit, into errors: inout [DecodeError]) {
        // Held where no history counts its slabs: its bytes are copied out of them.
        undetected.append(unit.detached())
        undetectedBytes += unit.bytes.count
        while undetectedBytes > Self.maxUndetectedBytes, let oldest = undetected.first {
            undetected.removeFirst()
            undetectedBytes -= oldest.bytes.count
            counters.nalUnits["unrecognized", default: 0] += 1
        }
        if undetectedBytes >= Self.maxUndetectedBytes { reportUnknownCodec(into: &errors) }
    }

    /// No parameter set of either codec in what arrived: an error of the input, once per stream.
    private func reportUnknownCodec(into errors: inout [DecodeError]) {
        guard codec == nil, !undetected.isEmpty || counters.nalUnits["unrecognized"] != nil else { return }
        counters.nalUnits["unrecognized", default: 0] += undetected.count
        let units = counters.nalUnits["unrecognized"] ?? 0
        undetected = []
        undetectedBytes = 0
        guard !unknownCodecReported else { return }
        unknownCodecReported = true
        record(
            DecodeError(
                .unknownCodec,
                "neither H.264 nor H.265: \(units) NAL units and no parameter set of either codec; nothing was decoded"),
            in: &errors)
    }

    /// At the end of a stream that gave no picture: units of other layers were all it had, so
    /// its silence is an error of the input, not an empty success.
    private func reportOnlyOtherLayers(into errors: inout [DecodeError]) {
        guard !streamHasBaseLayerPicture, streamUnitsOutsideBaseLayer > 0 else { return }
        record(
            DecodeError(
                .unsupportedStream,
                "the stream holds \(streamUnitsOutsideBaseLayer) NAL units of layers above the base layer (SVC, MVC "
                    + "or H.265's layer extensions) and no picture of the base layer, the only layer decoded; "
                    + "nothing was decoded"),
            in: &errors)
    }

    /// At the end of a stream whose every picture was dropped waiting for a point decoding can
    /// start from: with no parameter sets at all (an app that kept them aside, as VideoToolbox's
    /// format description and MediaCodec's csd buffers do) or no keyframe, that is an error of
    /// the input that says which, not an empty success.
    private func reportNoStartingPoint(into errors: inout [DecodeError]) {
        guard !streamReachedStartPoint, !streamHadError, streamDroppedBeforeKeyframe > 0, let reader else { return }
        let pictures = "\(streamDroppedBeforeKeyframe) picture\(streamDroppedBeforeKeyframe == 1 ? "" : "s")"
        let message: String
        if !reader.hasParameterSets {
            let sets = reader.codec == .h265 ? "VPS, SPS and PPS" : "SPS and PPS"
            message =
                "\(pictures) and no \(sets) to decode them with; nothing was decoded. Send the parameter sets in the "
                + "stream before the first keyframe (an encoder that keeps them aside has them in its avcC or hvcC "
                + "record: each with a start code before it)"
        } else {
            message =
                "\(pictures) and no keyframe (\(reader.codec == .h265 ? "IRAP" : "IDR or recovery point")) to start "
                + "decoding from; nothing was decoded"
        }
        record(DecodeError(.noDecodablePicture, message), in: &errors)
    }

    /// A picture's last NAL unit ends only where the next start code begins, and the access unit
    /// only where the next unit shows it belongs to another picture. When the first bytes of
    /// that next unit are already here and settle it, the picture goes on now rather than when
    /// the next unit is complete: for a camera sending one slice per picture, that is one
    /// picture interval sooner. The access units are the same either way.
    private func endAccessUnitEarly(into errors: inout [DecodeError]) {
        guard pushRefusal == .none, let prefix = splitter.pendingUnitPrefix,
            reader?.nextUnitEndsAccessUnit(prefix: prefix) == true
        else { return }
        endAccessUnit(into: &errors)
    }

    /// Ends the access unit under way. A parameter set of the other codec does so: it belongs to no
    /// picture of this stream, whether it is refused or starts a new one. `endAccessUnitEarly`
    /// ends it in some of these cases already, when the set's first bytes end a piece, so
    /// ending it here in all of them keeps where a picture ends apart from how the stream was cut
    /// into pieces. The picture counts as the stream's when the set would start a new stream.
    private func endAccessUnit(into errors: inout [DecodeError]) {
        guard var reader else { return }
        self.reader = nil
        reader.endAccessUnit { report($0, into: &errors) }
        self.reader = reader
    }

    // MARK: - 3: what the reader says

    private func report(_ event: ReaderEvent, into errors: inout [DecodeError]) {
        switch event {
        case .accessUnit(let unit):
            format = unit.sequence.format
            streamHasPictures = true
            streamHasBaseLayerPicture = true
            streamReachedStartPoint = true
            let indexed = IndexedAccessUnit(index: nextIndex, unit: unit, pts: samplePTS)
            nextIndex += 1
            if let unitHandler { errors += unitHandler(indexed) }
        case .droppedBeforeKeyframe(let count):
            counters.framesDroppedBeforeKeyframe += count
            streamDroppedBeforeKeyframe += count
            streamHasBaseLayerPicture = true
        case .skippedLeading(let count):
            counters.framesSkippedLeading += count
            streamHasBaseLayerPicture = true
            streamReachedStartPoint = true
        case .skippedNotKeyframe(let count):
            counters.framesSkippedNotKeyframe += count
            streamHasBaseLayerPicture = true
            streamReachedStartPoint = true
            // Skipped, they still hold their places: a keyframe keeps the number `decode: all`
            // gives it, and a switch of mode keeps the numbers after it.
            nextIndex += Int64(count)
        case .outsideBaseLayer(let count):
            counters.unitsOutsideBaseLayer += count
            streamUnitsOutsideBaseLayer += count
        case .unreadableParameterSet(let error):
            record(DecodeError(error), in: &errors)
        }
    }

    private func countAccessUnits() {
        guard let reader else { return }
        counters.accessUnits += reader.accessUnitsAssembled - accessUnitsReported
        accessUnitsReported = reader.accessUnitsAssembled
    }

    // MARK: - Errors

    /// At the end of a stream: bytes that were never part of a NAL unit are an error of the
    /// input (garbage before the first start code, or no start code at all), not silence.
    private func reportUnsplittableBytes(into errors: inout [DecodeError]) {
        let discarded = splitter.discardedBytes - discardedBytesReported
        discardedBytesReported = splitter.discardedBytes
        let units = splitter.emittedUnits + splitter.droppedUnits
        defer { unitsAtStreamStart = units }
        if units == unitsAtStreamStart && counters.bytes > bytesAtStreamStart {
            let bytes = counters.bytes - bytesAtStreamStart
            bytesAtStreamStart = counters.bytes
            record(
                DecodeError(.invalidData, "not an H.264 or H.265 Annex B stream: no start code in \(bytes) bytes"),
                in: &errors)
        } else if discarded > 0 {
            record(DecodeError(.invalidData, "\(discarded) bytes that belong to no NAL unit were skipped"), in: &errors)
        }
        bytesAtStreamStart = counters.bytes
    }

    /// The first bytes of a stream (no start code or unit of it yet) that are length-prefixed
    /// NAL units, as VideoToolbox hands them out, refuse the push, saying how to send them:
    /// read as Annex B they would be garbage with start codes made up inside them.
    /// Returns whether `bytes` are not to be split: they begin such a push, or are more of one.
    private func consumeIfLengthPrefixed(_ bytes: UnsafeRawBufferPointer, into errors: inout [DecodeError]) -> Bool {
        if pushRefusal != .bytes {
            guard pushRefusal == .none, !splitter.hasPendingUnit,
                splitter.emittedUnits + splitter.droppedUnits == unitsAtStreamStart,
                splitter.skippedBytes == discardedBytesReported, LengthPrefixedUnits.beginStream(bytes)
            else { return false }
            refuseLengthPrefixed(into: &errors)
        }
        // Counted as read, and as the stream's start still: no "no start code" error follows.
        counters.bytes += bytes.count
        bytesAtStreamStart += bytes.count
        return true
    }

    private func refuseLengthPrefixed(into errors: inout [DecodeError]) {
        pushRefusal = .bytes
        record(
            DecodeError(
                .lengthPrefixedUnits,
                "these bytes are NAL units each after a 4-byte length (AVCC or HVCC, as VideoToolbox and MP4 samples "
                    + "hold them), not an Annex B stream: write a start code 00 00 00 01 in place of each length, and "
                    + "send the parameter sets of the avcC or hvcC record the same way before the first keyframe; or "
                    + "push an MP4 to frametap serve"),
            in: &errors)
    }

    /// The rest of the push is refused: none of it reaches a decoder.
    private func refuse(_ why: String, into errors: inout [DecodeError]) {
        if pushRefusal == .none { pushRefusal = .units }
        record(DecodeError(.codecMismatch, why), in: &errors)
    }

    private func record(_ error: DecodeError, in errors: inout [DecodeError]) {
        counters.decodeErrors += 1
        lastError = error
        errors.append(error)
        streamHadError = true
    }
}
