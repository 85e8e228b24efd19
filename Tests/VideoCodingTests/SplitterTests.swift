import TestSupport
import Testing
import VideoCoding

/// Everything the splitter reported, for comparisons.
struct SplitResult: Equatable {
    var units: [[UInt8]] = []
    var offsets: [Int] = []
    var dropped = 0
    var droppedPrefixes: [[UInt8]] = []

    mutating func record(_ event: SplitterEvent) {
        switch event {
        case .unit(let unit):
            units.append(Array(unit.bytes))
            offsets.append(unit.streamOffset)
        case .dropped(let error, let prefix):
            #expect(error.code == .nalTooLarge)
            dropped += 1
            droppedPrefixes.append(Array(prefix))
        }
    }
}

func split(_ stream: [UInt8], pieces: [Int]? = nil, maxNALBytes: Int = 8 << 20) -> SplitResult {
    var splitter = AnnexBSplitter(maxNALBytes: maxNALBytes)
    var result = SplitResult()
    var offset = 0
    for size in pieces ?? [stream.count] {
        let end = min(stream.count, offset + size)
        splitter.push(Array(stream[offset..<end])) { result.record($0) }
        offset = end
    }
    if offset < stream.count { splitter.push(Array(stream[offset...])) { result.record($0) } }
    splitter.finish { result.record($0) }
    return result
}

@Suite(.timeLimit(.minutes(10))) struct SplitterTests {
    @Test func anAbandonedUnitIsDroppedAndTheNextStartCodeResynchronises() {
        var splitter = AnnexBSplitter()
        var result = SplitResult()
        splitter.push([0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x65, 9, 9]) { result.record($0) }
        splitter.abandonIncompleteUnit()  // the IDR above was cut short
        splitter.push([7, 7, 0, 0, 1, 0x41, 5, 6]) { result.record($0) }
        splitter.finish { result.record($0) }
        #expect(result.units == [[0x67, 1, 2], [0x41, 5, 6]])
        #expect(splitter.discardedBytes == 3 + 2)
    }

    @Test func threeAndFourByteStartCodes() {
        let stream: [UInt8] = [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 0, 1, 0x65, 4, 5]
        let result = split(stream)
        #expect(result.units == [[0x67, 1, 2], [0x68, 3], [0x65, 4, 5]])
        #expect(result.offsets == [4, 10, 16])
    }

    @Test func leadingGarbageIsCountedAndLeadingZerosAreNot() {
        var splitter = AnnexBSplitter()
        var units: [[UInt8]] = []
        splitter.push([0xAB, 0xCD, 0, 0, 0, 0, 1, 0x09, 0xF0]) { if case .unit(let u) = $0 { units.append(Array(u.bytes)) } }
        splitter.finish { if case .unit(let u) = $0 { units.append(Array(u.bytes)) } }
        #expect(units == [[0x09, 0xF0]])
        #expect(splitter.discardedBytes == 2)
        #expect(splitter.bytesConsumed == 9)

        var clean = AnnexBSplitter()
        clean.push([0, 0, 0, 0, 0, 1, 0x09, 0xF0]) { _ in }
        clean.finish { _ in }
        #expect(clean.discardedBytes == 0)
    }

    @Test func streamWithoutStartCodeIsAllDiscarded() {
        var splitter = AnnexBSplitter()
        var events = 0
        splitter.push([1, 2, 3, 0, 0]) { _ in events += 1 }
        splitter.finish { _ in events += 1 }
        #expect(events == 0)
        #expect(splitter.discardedBytes == 3)
    }

    @Test func trailingZerosAreStripped() {
        let stream: [UInt8] = [0, 0, 1, 0x67, 0x42, 0, 0, 0, 0, 0, 0, 1, 0x68, 0xCE, 0, 0, 0, 0]
        #expect(split(stream).units == [[0x67, 0x42], [0x68, 0xCE]])
    }

    @Test func zerosInsideAUnitAreKept() {
        let stream: [UInt8] = [0, 0, 1, 0x06, 0, 0, 3, 0, 0, 0x80, 0, 0, 2, 7]
        #expect(split(stream).units == [[0x06, 0, 0, 3, 0, 0, 0x80, 0, 0, 2, 7]])
    }

    @Test func emptyUnitsAreSkipped() {
        let stream: [UInt8] = [0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0x09, 0x10, 0, 0, 1]
        let result = split(stream)
        #expect(result.units == [[0x09, 0x10]])
    }

    @Test func startCodeCutAtEveryPosition() {
        let stream: [UInt8] = [0, 0, 0, 1, 0x67, 0x64, 0, 0x1F, 0, 0, 0, 1, 0x68, 0xEE, 0, 0, 1, 0x65, 0x88, 0, 0]
        let whole = split(stream)
        #expect(whole.units == [[0x67, 0x64, 0, 0x1F], [0x68, 0xEE], [0x65, 0x88]])
        for cut in 0...stream.count {
            #expect(split(stream, pieces: [cut, stream.count]) == whole, "cut at \(cut)")
            for secondCut in cut...stream.count {
                #expect(split(stream, pieces: [cut, secondCut - cut, stream.count]) == whole)
            }
        }
        #expect(split(stream, pieces: Array(repeating: 1, count: stream.count)) == whole)
    }

    @Test func emptyPushesChangeNothing() {
        let stream: [UInt8] = [0, 0, 1, 0x67, 1, 0, 0, 1, 0x68, 2]
        var splitter = AnnexBSplitter()
        var result = SplitResult()
        splitter.push([]) { result.record($0) }
        splitter.push(Array(stream[0..<2])) { result.record($0) }
        splitter.push([]) { result.record($0) }
        splitter.push(UnsafeRawBufferPointer(start: nil, count: 0)) { result.record($0) }
        splitter.push(Array(stream[2...])) { result.record($0) }
        splitter.finish { result.record($0) }
        #expect(result == split(stream))
    }

    @Test func oversizedUnitIsDroppedAndSplittingResumes() {
        let big = [UInt8(0x65)] + Array(repeating: 0x11, count: 100)
        let stream: [UInt8] = [0, 0, 0, 1, 0x67, 1] + [0, 0, 1] + big + [0, 0, 1, 0x68, 2, 0, 0, 1, 0x41, 3]
        let whole = split(stream, maxNALBytes: 50)
        #expect(whole.units == [[0x67, 1], [0x68, 2], [0x41, 3]])
        #expect(whole.dropped == 1)
        #expect(whole.droppedPrefixes == [Array(big.prefix(AnnexBSplitter.prefixLength))])
        #expect(split(stream, pieces: Array(repeating: 7, count: 30), maxNALBytes: 50) == whole)
        // A unit exactly at the limit passes; trailing zeros and start-code zeros do not count.
        let exact = [UInt8(0x65)] + Array(repeating: 0x22, count: 49) + [0, 0, 0, 0]
        let atLimit = split([0, 0, 1] + exact + [0, 0, 0, 1, 0x41, 1], maxNALBytes: 50)
        #expect(atLimit.dropped == 0)
        #expect(atLimit.units.first?.count == 50)
    }

    @Test func oversizedLastUnitIsDroppedAtOnce() {
        var splitter = AnnexBSplitter(maxNALBytes: 10)
        var dropped = 0
        var units = 0
        let handle: (SplitterEvent) -> Void = { event in
            switch event {
            case .unit: units += 1
            case .dropped: dropped += 1
            }
        }
        splitter.push([0, 0, 1, 0x65] + Array(repeating: 9, count: 20)) { handle($0) }
        #expect(dropped == 1)
        splitter.push(Array(repeating: 9, count: 1000)) { handle($0) }
        splitter.finish { handle($0) }
        #expect(dropped == 1)
        #expect(units == 0)
        #expect(splitter.droppedUnits == 1)
    }

    @Test func finishResetsForANewStream() {
        var splitter = AnnexBSplitter()
        var result = SplitResult()
        splitter.push([0, 0, 1, 0x67, 1, 0, 0]) { result.record($0) }
        splitter.finish { result.record($0) }
        // The two zeros at the end of the first stream must not join a start code here.
        splitter.push([1, 0x68, 0, 0, 1, 0x68, 2]) { result.record($0) }
        splitter.finish { result.record($0) }
        #expect(result.units == [[0x67, 1], [0x68, 2]])
        #expect(result.offsets == [3, 5])
        #expect(splitter.discardedBytes == 2)
    }

    @Test func randomChunkingsMatchOneShotSplitting() {
        var rng = SplitMix64(seed: 0x5EED)
        for iteration in 0..<200 {
            let stream = randomAnnexBStream(&rng, units: 1 + Int(rng.next() % 12))
            let maxNALBytes = iteration % 3 == 0 ? 40 : 8 << 20
            let whole = split(stream, maxNALBytes: maxNALBytes)
            for _ in 0..<10 {
                var pieces: [Int] = []
                var covered = 0
                while covered < stream.count {
                    let size = Int(rng.next() % 9)  // zero-sized pieces included
                    pieces.append(size)
                    covered += size
                }
                #expect(split(stream, pieces: pieces, maxNALBytes: maxNALBytes) == whole, "iteration \(iteration)")
            }
        }
    }

    @Test func randomStreamsRoundTripThroughAnnexB() {
        var rng = SplitMix64(seed: 42)
        for _ in 0..<100 {
            let units = (0..<Int(1 + rng.next() % 8)).map { _ in randomNALBytes(&rng) }
            let stream = units.flatMap { [0, 0, 0, 1] as [UInt8] + $0 }
            #expect(split(stream).units == units)
        }
    }

    @Test func longRunsOfZerosAndGarbage() {
        let stream: [UInt8] = Array(repeating: 0, count: 1000) + [1, 0x09, 0xF0] + Array(repeating: 0, count: 5000)
            + [1, 0x67, 0x11] + Array(repeating: 0, count: 3)
        #expect(split(stream).units == [[0x09, 0xF0], [0x67, 0x11]])
        #expect(split(stream, pieces: Array(repeating: 13, count: 1000)).units == [[0x09, 0xF0], [0x67, 0x11]])
    }

    @Test func staticSplitMatchesStreaming() {
        let stream: [UInt8] = [0, 0, 1, 0x67, 1, 0, 0, 0, 1, 0x68, 2]
        #expect(AnnexBSplitter.split(stream).map { Array($0.bytes) } == split(stream).units)
    }
}

/// A valid NAL unit body: non-zero header, no start-code emulation, no trailing zero.
func randomNALBytes(_ rng: inout SplitMix64) -> [UInt8] {
    var rbsp: [UInt8] = []
    for _ in 0..<Int(rng.next() % 60) {
        // Many zeros so that emulation prevention and zero runs get exercised.
        rbsp.append(rng.next() % 3 == 0 ? 0 : UInt8(truncatingIfNeeded: rng.next()))
    }
    rbsp.append(UInt8(1 + rng.next() % 255))
    return [UInt8(1 + rng.next() % 0x7F)] + RBSP.escape(rbsp)
}

func randomAnnexBStream(_ rng: inout SplitMix64, units: Int) -> [UInt8] {
    var stream: [UInt8] = []
    for _ in 0..<Int(rng.next() % 3) { stream.append(UInt8(truncatingIfNeeded: rng.next() | 1)) }
    for _ in 0..<units {
        stream.append(contentsOf: Array(repeating: 0, count: Int(rng.next() % 3)))
        stream.append(contentsOf: rng.next() % 2 == 0 ? [0, 0, 1] : [0, 0, 0, 1])
        stream.append(contentsOf: randomNALBytes(&rng))
    }
    stream.append(contentsOf: Array(repeating: 0, count: Int(rng.next() % 4)))
    return stream
}
