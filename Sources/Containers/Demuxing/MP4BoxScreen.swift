/// What an MP4 may make libavformat's demuxer hold, checked before the demuxer reads it.
///
/// libavformat believes an MP4's sample counts: a `trun` or `stsz` of a few bytes may say a track
/// has tens of millions of samples, and the demuxer then allocates and fills an index entry for
/// each (24 bytes, more with their timing) before it reads one. So every top-level box the demuxer
/// parses is gathered whole (up to a bound) and its sample tables are checked against `Limits`
/// before it is handed on; media data (`mdat`), padding, and boxes whose type is not four
/// printable characters (libavformat skips those) pass straight through. A box that breaks a
/// limit ends the input with `refusal` (`invalid_container`).
///
/// Boxes are searched wherever libavformat might parse them, not only where the standard puts
/// them: libavformat reads a sample table box inside any box it descends into. So the screen
/// descends into the containers it knows and into any box whose payload is a sequence of boxes;
/// reads a `meta` from the first `hdlr` found 4 bytes at a time, as libavformat does; and reads
/// a sample entry's boxes after each length its fields may take. A compressed `moov` (`cmov`),
/// which libavformat unpacks and parses where no screen sees it, is refused.
///
/// libavformat's index grows by an entry for every sample the fragments declare, for as long as
/// the stream lasts. So the screen counts them: once `Limits.freshStartAfterSamples` are declared,
/// it stops before the next `moof` (`pausedAt`) for `Demuxer` to start a fresh demuxer there
/// over `initSegment`. A stream that cannot start afresh is refused past
/// `Limits.samplesWithoutFreshStart`.
///
/// Used on the demuxer's thread only.
final class MP4BoxScreen: DemuxByteInput {
    struct Limits: Sendable, Equatable {
        /// Samples the sample tables (`stsz`, `stz2`) of one `moov` may describe, all tracks together.
        var samplesInMovie = 1 << 20
        /// Samples the `trun` boxes of one top-level box (a `moof`) may describe.
        var samplesInFragment = 1 << 18
        /// Largest sample a table may declare: libavformat reads each sample into one packet.
        var sampleBytes = Demuxer.maxGatheredBytes
        /// Largest `moov`.
        var movieBoxBytes = 64 << 20
        /// Largest other top-level box that libavformat parses.
        var boxBytes = 16 << 20
        /// Largest `ftyp` and `moov` kept to start a fresh demuxer at a fragment.
        var initSegmentBytes = 1 << 20
        /// Samples declared (all tracks) after which the input stops before the next `moof`,
        /// for a fresh demuxer to read on from there.
        var freshStartAfterSamples = 1 << 15
        /// Samples a demuxer may be declared when the stream cannot start afresh (its `moov`
        /// describes samples too, or is larger than `initSegmentBytes`).
        var samplesWithoutFreshStart = 1 << 22
    }

    private let limits: Limits
    private let input: any DemuxByteInput
    /// Bytes handed on so far: the offset in the MP4 of the next one.
    private var delivered = 0
    /// Why the input was ended early; the demuxer reports it.
    private(set) var refusal: ContainerError?
    /// The `ftyp` and a `moov` that describes no sample: what a fresh demuxer reads before the
    /// fragment it starts at. Nil until the `moov` is read, or when the `moov` holds samples
    /// (a fresh demuxer would look for them again) or is larger than `initSegmentBytes`.
    private(set) var initSegment: [UInt8]?
    /// The offset of the `moof` the input stopped before, for a fresh start.
    private(set) var pausedAt: Int?
    /// Samples declared to the current demuxer, all tracks together: its index.
    private var samplesDeclared = 0
    /// The type of the box the input ended inside, if it did.
    private(set) var cutShortBox: String?
    /// A whole `moov` was handed on.
    private(set) var readWholeMovie = false
    /// The last top-level box ran to the end of the input (size 0), and the input ended:
    /// libavformat, looking for the box after it, finds none.
    private(set) var endedInBoxToTheEnd = false

    /// Bytes ready to hand on: a box gathered whole, or the header of one passed through.
    private var ready: [UInt8] = []
    private var readyOffset = 0
    /// Payload bytes of the current top-level box still to pass straight through; nil: all
    /// that follows (a box that runs to the input's end).
    private var passing: Int? = 0
    /// The type of the box passed through now.
    private var passingType: UInt32 = 0
    /// No more bytes will be handed on after `ready`.
    private var ended = false
    /// The input said to stop: every read says so from then on.
    private var interrupted = false
    /// The header of the `moof` the input stopped before.
    private var heldHeader: [UInt8] = []
    private var fileType: [UInt8]?
    private var scratch = [UInt8](repeating: 0, count: 32 << 10)
    /// `ready` keeps its storage for the next box up to this size (a large `moov` gives it back).
    private static let keptBufferBytes = 1 << 20

    init(input: any DemuxByteInput, limits: Limits = Limits()) {
        self.input = input
        self.limits = limits
    }

    /// Goes on after a pause, from the `moof` it stopped before, for a fresh demuxer.
    func resume() {
        pausedAt = nil
        samplesDeclared = 0
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> DemuxInputRead {
        while true {
            if refusal != nil || interrupted { return .interrupted }
            if readyOffset < ready.count {
                let count = min(buffer.count, ready.count - readyOffset)
                ready.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[readyOffset..<(readyOffset + count)])) }
                readyOffset += count
                delivered += count
                return .bytes(count)
            }
            if ended || pausedAt != nil { return .end }
            if passing != 0 {
                let wanted = min(buffer.count, passing ?? .max)
                let result = input.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<wanted]))
                switch result {
                case .bytes(let count):
                    passing = passing.map { $0 - count }
                    delivered += count
                case .interrupted: interrupted = true
                case .end:
                    if passing == nil { endedInBoxToTheEnd = true } else { cutShortBox = BoxType.name(passingType) }
                }
                return result
            }
            if let stop = takeNextBox() { return stop }
        }
    }

    // MARK: - Top-level boxes

    /// Reads the next top-level box's header and decides what to do with it: pass it through,
    /// gather and check it, or stop before it. Returns what `read` returns when the input stops.
    private func takeNextBox() -> DemuxInputRead? {
        // `ready` is reused for every box: headers and fragments come many times a second.
        if ready.capacity > Self.keptBufferBytes { ready = [] } else { ready.removeAll(keepingCapacity: true) }
        readyOffset = 0
        ready += heldHeader
        heldHeader = []
        if let stop = fill(to: 8) { return endHere(stop) }
        var size = Int(Self.uint32(ready, at: 0))
        let type = Self.uint32(ready, at: 4)
        if size == 1 {
            if let stop = fill(to: 16) { return endHere(stop) }
            let large = Self.uint64(ready, at: 8)
            guard large >= 16, large <= UInt64(Int.max) else { return endHere(.end, cutShort: false) }
            size = Int(large)
        } else if size != 0 && size < 8 {
            // libavformat stops reading boxes here too.
            return endHere(.end, cutShort: false)
        }
        // A box that would end past 2^62 bytes: libavformat cannot skip it and would read on
        // inside it, where nothing would be checked. No file is that long: the input ends here.
        if size > (1 << 62) - delivered { return endHere(.end, cutShort: false) }
        if type == BoxType.moof && initSegment != nil && samplesDeclared >= limits.freshStartAfterSamples {
            heldHeader = ready
            ready.removeAll(keepingCapacity: true)
            pausedAt = delivered
            return .end
        }
        // libavformat parses no box of a type that is not four printable characters (zeros
        // padding a file, garbage after it): such boxes pass through as media data does.
        if BoxType.passedThrough.contains(type) || !BoxType.isPrintable(type) {
            passing = size == 0 ? nil : size - ready.count
            passingType = type
            return nil
        }
        let isMovie = type == BoxType.moov || type == BoxType.hoov
        let bound = isMovie ? limits.movieBoxBytes : limits.boxBytes
        let name = BoxType.name(type)
        guard size != 0 else {
            return refuse("its \(name) box runs to the end of the input; FrameTap reads \(name) boxes of a stated size")
        }
        guard size <= bound else {
            return refuse("its \(name) box is \(size) bytes; FrameTap reads \(name) boxes of up to \(bound >> 20) MiB")
        }
        let stop = fill(to: size)
        if stop == .interrupted { return endHere(.interrupted) }
        if stop != nil { cutShortBox = name }
        // A box cut short is still parsed by libavformat as far as it goes: checked all the same.
        let tally = Self.tally(ready)
        if let problem = Self.problem(in: tally, limits: limits) { return refuse(problem) }
        if isMovie {
            readWholeMovie = readWholeMovie || stop == nil
            let segment = (fileType ?? []) + ready
            initSegment = tally.movieSamples == 0 && segment.count <= limits.initSegmentBytes ? segment : nil
        }
        samplesDeclared += tally.movieSamples + tally.fragmentSamples
        if initSegment == nil && samplesDeclared > limits.samplesWithoutFreshStart {
            return refuse(
                "it declared more than \(limits.samplesWithoutFreshStart) samples, and FrameTap cannot start reading it afresh "
                    + "at a fragment (that needs a moov without samples of its own, of at most \(limits.initSegmentBytes >> 20) MiB)")
        }
        if type == BoxType.ftyp { fileType = ready }
        ended = stop != nil
        return nil
    }

    /// Appends input to `ready` until it holds `count` bytes; returns what stopped it short.
    private func fill(to count: Int) -> DemuxInputRead? {
        while ready.count < count {
            let wanted = min(scratch.count, count - ready.count)
            let result = scratch.withUnsafeMutableBytes { input.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<wanted])) }
            guard case .bytes(let got) = result else { return result }
            ready += scratch[..<got]
        }
        return nil
    }

    /// Hands on what `ready` holds (a header, whole or cut short), then stops as `stop` says.
    private func endHere(_ stop: DemuxInputRead, cutShort: Bool = true) -> DemuxInputRead? {
        guard stop != .interrupted else {
            interrupted = true
            return .interrupted
        }
        guard !ready.isEmpty else { return .end }
        if stop == .end && cutShort { cutShortBox = ready.count >= 8 ? BoxType.name(Self.uint32(ready, at: 4)) : "next" }
        ended = true
        return nil
    }

    private func refuse(_ why: String) -> DemuxInputRead {
        refusal = ContainerError(.invalidContainer, "the MP4 is refused: \(why)")
        return .interrupted
    }

    // MARK: - Checking a box

    /// What the sample tables in a box claim, wherever they lie in it.
    private struct Tally {
        /// Samples of `stsz` and `stz2` boxes.
        var movieSamples = 0
        /// Samples of `trun` boxes.
        var fragmentSamples = 0
        /// The largest sample size a table or a default declares.
        var largestSample = 0
        /// A compressed `moov` (`cmov`) lies in the box.
        var compressedMovie = false
    }

    /// The tally of `box`, a whole top-level box, header included.
    private static func tally(_ box: [UInt8]) -> Tally {
        var tally = Tally()
        walk(box, 0..<box.count, depth: 0, tally: &tally)
        return tally
    }

    /// Why libavformat must not read a box of `tally`, or nil.
    private static func problem(in tally: Tally, limits: Limits) -> String? {
        if tally.compressedMovie {
            return "its moov is compressed (cmov), which FrameTap does not read"
        }
        if tally.movieSamples > limits.samplesInMovie {
            return "its sample tables describe \(tally.movieSamples) samples; FrameTap reads MP4s of up to "
                + "\(limits.samplesInMovie) samples (split the file, or send it as fragmented MP4)"
        }
        if tally.fragmentSamples > limits.samplesInFragment {
            return "one of its fragments describes \(tally.fragmentSamples) samples; FrameTap reads fragments of up to "
                + "\(limits.samplesInFragment) samples"
        }
        if tally.largestSample > limits.sampleBytes {
            return "its sample tables declare a sample of \(tally.largestSample) bytes; FrameTap reads samples of up to "
                + "\(limits.sampleBytes >> 20) MiB"
        }
        return nil
    }

    private static func walk(_ bytes: [UInt8], _ range: Range<Int>, depth: Int, tally: inout Tally) {
        guard depth < 16 else { return }
        forEachBox(in: bytes, range) { type, payload in
            if BoxType.declaringSamples.contains(type) || type == BoxType.cmov {
                count(type, bytes, payload, tally: &tally)
            } else if type == BoxType.stsd {
                sampleEntries(bytes, payload, depth: depth, tally: &tally)
            } else if type == BoxType.meta {
                // libavformat looks for an `hdlr` 4 bytes at a time, and reads boxes from there.
                var offset = payload.lowerBound
                while offset + 8 < payload.upperBound {
                    if uint32(bytes, at: offset) == BoxType.hdlr {
                        walk(bytes, (offset - 4)..<payload.upperBound, depth: depth + 1, tally: &tally)
                        break
                    }
                    offset += 4
                }
            } else if BoxType.containers.contains(type) || (!BoxType.leaves.contains(type) && tiles(bytes, payload)) {
                walk(bytes, payload, depth: depth + 1, tally: &tally)
            }
        }
    }

    /// libavformat reads a sample entry's boxes after the entry's own fields, whose length
    /// depends on the kind of track, its version and a palette: every length they may take is
    /// tried (a decoy at one hides nothing at another).
    private static func sampleEntries(_ bytes: [UInt8], _ payload: Range<Int>, depth: Int, tally: inout Tally) {
        guard payload.count > 8 else { return }
        forEachBox(in: bytes, (payload.lowerBound + 8)..<payload.upperBound) { _, entry in
            // Reserved and data reference (8), then: data and timecode (26), sound versions 0, 1
            // and 2 (28, 44, 64), video (78).
            var lengths = [8, 26, 28, 44, 64, 78]
            // A video entry of 1, 2, 4 or 8 bits, not grey, whose colour table is in the file:
            // its palette comes before its boxes.
            let pixelDepth = Int(uint32(bytes, at: entry.lowerBound + 72) & 0xFFFF)
            let colourTable = uint32(bytes, at: entry.lowerBound + 74) & 0xFFFF
            if entry.count >= 86, [1, 2, 4, 8].contains(pixelDepth & 0x1F), pixelDepth & 0x20 == 0, colourTable == 0 {
                let first = Int(uint32(bytes, at: entry.lowerBound + 78))
                let last = Int(uint32(bytes, at: entry.lowerBound + 82) & 0xFFFF)
                lengths.append(86 + (first <= last && last <= 255 ? (last - first + 1) * 8 : 0))
            }
            for length in lengths where entry.count > length {
                walk(bytes, (entry.lowerBound + length)..<entry.upperBound, depth: depth + 1, tally: &tally)
            }
        }
    }

    /// What a box that declares samples (or a `cmov`) adds to `tally`.
    private static func count(_ type: UInt32, _ bytes: [UInt8], _ payload: Range<Int>, tally: inout Tally) {
        switch type {
        case BoxType.stsz: sampleSizes(bytes, payload, tally: &tally)
        case BoxType.stz2: compactSampleSizes(bytes, payload, tally: &tally)
        case BoxType.trun: trackRun(bytes, payload, tally: &tally)
        case BoxType.tfhd:
            // version and flags, track; then the optional fields the flags name, in order.
            let flags = fullBoxFlags(bytes, payload)
            var offset = payload.lowerBound + 8
            if flags & 0x01 != 0 { offset += 8 }
            if flags & 0x02 != 0 { offset += 4 }
            if flags & 0x08 != 0 { offset += 4 }
            if flags & 0x10 != 0, offset + 4 <= payload.upperBound { declare(sampleBytes: uint32(bytes, at: offset), &tally) }
        case BoxType.trex:
            if payload.count >= 20 { declare(sampleBytes: uint32(bytes, at: payload.lowerBound + 16), &tally) }
        case BoxType.cmov:
            tally.compressedMovie = true
        default:
            break
        }
    }

    private static func declare(sampleBytes: UInt32, _ tally: inout Tally) {
        tally.largestSample = max(tally.largestSample, Int(sampleBytes))
    }

    private static func sampleSizes(_ bytes: [UInt8], _ payload: Range<Int>, tally: inout Tally) {
        guard payload.count >= 12 else { return }
        let constant = uint32(bytes, at: payload.lowerBound + 4)
        let count = Int(uint32(bytes, at: payload.lowerBound + 8))
        tally.movieSamples += count
        guard constant == 0 else { return declare(sampleBytes: constant, &tally) }
        for offset in stride(from: payload.lowerBound + 12, to: min(payload.upperBound - 3, payload.lowerBound + 12 + 4 * count), by: 4) {
            declare(sampleBytes: uint32(bytes, at: offset), &tally)
        }
    }

    private static func compactSampleSizes(_ bytes: [UInt8], _ payload: Range<Int>, tally: inout Tally) {
        guard payload.count >= 12 else { return }
        tally.movieSamples += Int(uint32(bytes, at: payload.lowerBound + 8))
    }

    private static func trackRun(_ bytes: [UInt8], _ payload: Range<Int>, tally: inout Tally) {
        guard payload.count >= 8 else { return }
        let flags = fullBoxFlags(bytes, payload)
        let count = Int(uint32(bytes, at: payload.lowerBound + 4))
        tally.fragmentSamples += count
        var offset = payload.lowerBound + 8
        if flags & 0x001 != 0 { offset += 4 }
        if flags & 0x004 != 0 { offset += 4 }
        let fields = [0x100, 0x200, 0x400, 0x800].filter { flags & $0 != 0 }
        guard flags & 0x200 != 0 else { return }
        let stride = 4 * fields.count
        let sizeAt = 4 * fields.firstIndex(of: 0x200)!
        var entry = offset
        for _ in 0..<count {
            guard entry + stride <= payload.upperBound else { return }
            declare(sampleBytes: uint32(bytes, at: entry + sizeAt), &tally)
            entry += stride
        }
    }

    // MARK: - Box syntax

    /// Calls `body` with each box's type and payload one after another in `range`, up to the
    /// first whose header is malformed (where libavformat stops too); a box longer than what is
    /// left is cut to it, as libavformat does.
    private static func forEachBox(in bytes: [UInt8], _ range: Range<Int>, _ body: (UInt32, Range<Int>) -> Void) {
        var offset = range.lowerBound
        while offset + 8 <= range.upperBound {
            var size = Int(uint32(bytes, at: offset))
            var headerLength = 8
            if size == 1 {
                guard offset + 16 <= range.upperBound else { return }
                let large = uint64(bytes, at: offset + 8)
                guard large <= UInt64(Int.max) else { return }
                size = Int(large)
                headerLength = 16
            } else if size == 0 {
                size = range.upperBound - offset
            }
            guard size >= headerLength else { return }
            let end = size > range.upperBound - offset ? range.upperBound : offset + size
            body(uint32(bytes, at: offset + 4), (offset + headerLength)..<end)
            offset = end
        }
    }

    /// Whether `range` is one or more boxes of printable types that end exactly at its end.
    private static func tiles(_ bytes: [UInt8], _ range: Range<Int>) -> Bool {
        var offset = range.lowerBound
        while offset + 8 <= range.upperBound {
            let size = Int(uint32(bytes, at: offset))
            guard size >= 8, bytes[(offset + 4)..<(offset + 8)].allSatisfy({ (0x20...0x7E).contains($0) }) else { return false }
            offset += size
        }
        return offset == range.upperBound && !range.isEmpty
    }

    private static func uint32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        guard offset >= 0, offset + 4 <= bytes.count else { return 0 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    /// A full box's flags: the 24 bits after its version.
    private static func fullBoxFlags(_ bytes: [UInt8], _ payload: Range<Int>) -> Int {
        payload.count >= 4 ? Int(uint32(bytes, at: payload.lowerBound) & 0xFF_FFFF) : 0
    }

    private static func uint64(_ bytes: [UInt8], at offset: Int) -> UInt64 {
        UInt64(uint32(bytes, at: offset)) << 32 | UInt64(uint32(bytes, at: offset + 4))
    }

}

/// Box types as the 32-bit numbers their four characters make, as they are compared.
private enum BoxType {
    static func code(_ name: StaticString) -> UInt32 {
        name.withUTF8Buffer { $0.reduce(0) { $0 << 8 | UInt32($1) } }
    }

    /// The type's four characters, or its number in hexadecimal when they are not printable.
    static func name(_ type: UInt32) -> String {
        guard isPrintable(type) else { return "0x" + String(type, radix: 16) }
        return String(decoding: (0..<4).map { UInt8(truncatingIfNeeded: type >> (24 - 8 * $0)) }, as: UTF8.self)
    }

    static func isPrintable(_ type: UInt32) -> Bool {
        (0..<4).allSatisfy { (0x20...0x7E).contains(type >> (8 * $0) & 0xFF) }
    }

    static let moov = code("moov"), hoov = code("hoov"), moof = code("moof"), ftyp = code("ftyp"), meta = code("meta")
    static let stsz = code("stsz"), stz2 = code("stz2"), trun = code("trun"), tfhd = code("tfhd"), trex = code("trex")
    static let stsd = code("stsd"), cmov = code("cmov"), hdlr = code("hdlr")

    /// Boxes that declare samples or their sizes.
    static let declaringSamples: Set<UInt32> = [stsz, stz2, trun, tfhd, trex]

    /// Top-level boxes libavformat does not parse, passed straight through.
    static let passedThrough: Set<UInt32> = [code("mdat"), code("free"), code("skip"), code("wide")]

    /// Boxes libavformat descends into whatever they hold.
    static let containers: Set<UInt32> = [
        moov, hoov, code("trak"), code("mdia"), code("minf"), code("stbl"), code("dinf"), code("edts"), code("udta"),
        code("tref"), code("mvex"), moof, code("traf"), code("ilst"), code("sinf"), code("schi"), code("wave"),
        code("mfra"),
    ]

    /// Boxes that hold only fields, looked into no further (the common ones, for speed).
    static let leaves: Set<UInt32> = [
        code("mfhd"), code("tfdt"), code("mvhd"), code("tkhd"), code("mdhd"), code("hdlr"), code("stts"), code("stsc"),
        code("stco"), code("co64"), code("ctts"), code("stss"), code("sdtp"), code("elst"), code("vmhd"), code("smhd"),
        code("ftyp"), code("styp"), code("sidx"),
    ]
}

