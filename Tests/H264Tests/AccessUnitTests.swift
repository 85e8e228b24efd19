import Testing
@testable import H264
import VideoCoding

/// A small stream model: parameter sets and slices built to match each other.
struct StreamBuilder {
    var sps = SPSBuilder()
    var pps = PPSBuilder()
    var units: [NALUnit] = []

    mutating func parameterSets() {
        units.append(sps.nal)
        units.append(pps.nal)
    }

    mutating func slice(_ configure: (inout SliceBuilder) -> Void) {
        var slice = SliceBuilder()
        configure(&slice)
        units.append(slice.nal(sps: sps, pps: pps))
    }

    mutating func add(_ type: NALUnitType, _ payload: [UInt8] = [0x80]) {
        units.append(NALUnit(bytes: [NALHeader(refIdc: 0, type: type).byte] + payload))
    }

    /// Streams the units through a splitter and an assembler, as the service does.
    func assemble() -> (units: [AccessUnit], assembler: AccessUnitAssembler) {
        let stream = AccessUnit(nalUnits: units).annexB()
        var assembler = AccessUnitAssembler()
        var output: [AccessUnit] = []
        for unit in AnnexBSplitter.split(stream) { assembler.push(NALUnit(unit)) { output.append($0) } }
        assembler.finish { output.append($0) }
        return (output, assembler)
    }

    func shapes() -> [[NALUnitType]] { assemble().units.map { $0.nalUnits.map(\.type) } }
}

/// recovery_point SEI message bytes (payload type 6) for recovery_frame_cnt 0.
let recoveryPointSEI: [UInt8] = [6, 1, 0b1000_0000, 0x80]

@Suite(.timeLimit(.minutes(10))) struct AccessUnitTests {
    @Test func multiSlicePictures() {
        var stream = StreamBuilder()
        stream.add(.aud, [0xF0])
        stream.parameterSets()
        for mb in [0, 33, 66] {
            stream.slice {
                $0.type = .idr
                $0.firstMb = mb
                $0.sliceType = 7
            }
        }
        stream.add(.aud, [0x30])
        for mb in [0, 40] {
            stream.slice {
                $0.firstMb = mb
                $0.frameNum = 1
                $0.pocLsb = 2
            }
        }
        stream.add(.sei, recoveryPointSEI)
        stream.slice {
            $0.frameNum = 2
            $0.pocLsb = 4
        }
        let (units, assembler) = stream.assemble()
        #expect(units.map { $0.nalUnits.map(\.type) } == [
            [.aud, .sps, .pps, .idr, .idr, .idr], [.aud, .slice, .slice], [.sei, .slice],
        ])
        #expect(units.map(\.isIDR) == [true, false, false])
        #expect(units.map(\.isRandomAccessPoint) == [true, false, true])
        #expect(units[2].recoveryPoint?.recoveryFrameCount == 0)
        #expect(units.map(\.primarySliceType) == [.i, .p, .p])
        #expect(units.map(\.frameNum) == [0, 1, 2])
        #expect(units.allSatisfy { $0.hasPicture })
        #expect(units[0].streamOffset == 4)
        #expect(units[1].streamOffset == units[0].nalUnits.last!.streamOffset + units[0].nalUnits.last!.bytes.count + 4)
        #expect(assembler.accessUnitCount == 3)
        #expect(assembler.malformedUnits == 0 && assembler.slicesWithUnknownParameterSets == 0)
        #expect(assembler.parameterSets.sps[0] != nil)
    }

    @Test func fieldPairIsTwoAccessUnits() {
        var stream = StreamBuilder()
        stream.sps.frameMbsOnly = false
        stream.parameterSets()
        for bottom in [false, true] {
            for mb in [0, 20] {
                stream.slice {
                    $0.type = .idr
                    $0.fieldPic = true
                    $0.bottomField = bottom
                    $0.firstMb = mb
                }
            }
        }
        stream.slice {
            $0.frameNum = 1
            $0.pocLsb = 4
        }
        let units = stream.assemble().units
        #expect(units.map { $0.nalUnits.map(\.type) } == [[.sps, .pps, .idr, .idr], [.idr, .idr], [.slice]])
        #expect(units.map(\.isField) == [true, true, false])
        #expect(units.map(\.isBottomField) == [false, true, false])
    }

    @Test func nonVCLUnitsBetweenPictures() {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.slice { $0.type = .idr }
        stream.add(.filler, [0xFF, 0x80])  // belongs to the picture before it
        stream.add(.sei, [5, 1, 0, 0x80])
        stream.parameterSets()
        stream.add(.sei, [5, 1, 0, 0x80])
        stream.slice { $0.frameNum = 1 }
        stream.add(.pps)  // PPS alone: a new AU starts at it, before the slice
        stream.slice { $0.frameNum = 2 }
        stream.add(.prefix, [0x80])
        stream.slice { $0.frameNum = 3 }
        stream.add(.subsetSPS, [0x80])
        stream.slice { $0.frameNum = 4 }
        stream.add(.endOfSequence, [])
        stream.add(.endOfStream, [])
        stream.slice { $0.type = .idr }
        stream.add(.endOfSequence, [])
        stream.slice {
            $0.type = .idr
            $0.idrPicId = 1
        }
        // Units a decoder may still want at the end are passed on, not lost.
        stream.parameterSets()
        #expect(stream.shapes() == [
            [.sps, .pps, .idr, .filler], [.sei, .sps, .pps, .sei, .slice], [.pps, .slice], [.prefix, .slice],
            [.subsetSPS, .slice, .endOfSequence, .endOfStream], [.idr, .endOfSequence], [.idr], [.sps, .pps],
        ])
        #expect(stream.assemble().units.map(\.hasPicture) == [true, true, true, true, true, true, true, false])
    }

    @Test func prefixUnitsBeforeEverySliceOfAPicture() {
        // SVC/MVC base layers put a prefix unit (14) before each slice, not only before the first.
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.add(.subsetSPS)
        for frame in 0..<2 {
            for mb in [0, 40] {
                stream.add(.prefix)
                stream.slice {
                    $0.type = frame == 0 ? .idr : .slice
                    $0.frameNum = frame
                    $0.firstMb = mb
                }
                stream.add(.sliceExtension, [0x80])
            }
        }
        stream.add(.prefix)
        let idr = NALUnitType.idr, prefix = NALUnitType.prefix, slice = NALUnitType.slice, ext = NALUnitType.sliceExtension
        #expect(stream.shapes() == [
            [.sps, .pps, .subsetSPS, prefix, idr, ext, prefix, idr, ext], [prefix, slice, ext, prefix, slice, ext, prefix],
        ])
    }

    @Test func endOfSequenceSplitsEvenIdenticalHeaders() {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.slice { $0.type = .idr }
        stream.add(.endOfSequence, [])
        stream.slice { $0.type = .idr }
        #expect(stream.shapes() == [[.sps, .pps, .idr, .endOfSequence], [.idr]])
    }

    @Test func redundantSlicesStayWithTheirPrimaryPicture() {
        var stream = StreamBuilder()
        stream.pps.redundantPicCntPresent = true
        stream.parameterSets()
        stream.slice { $0.type = .idr }
        stream.slice {
            $0.type = .idr
            $0.redundantPicCnt = 1
        }
        stream.slice { $0.frameNum = 1 }
        stream.slice {
            $0.frameNum = 1
            $0.redundantPicCnt = 1
        }
        stream.slice {
            $0.frameNum = 1
            $0.firstMb = 40
            $0.redundantPicCnt = 2
        }
        stream.slice { $0.frameNum = 2 }
        #expect(stream.shapes() == [[.sps, .pps, .idr, .idr], [.slice, .slice, .slice], [.slice]])
    }

    @Test func repeatedFirstMacroblockStartsAPicture() {
        // Two non-reference pictures that §7.4.1.2.4 cannot tell apart (same frame_num, POC type 2).
        var stream = StreamBuilder()
        stream.sps.pocType = 2
        stream.parameterSets()
        stream.slice { $0.type = .idr }
        for _ in 0..<2 {
            for mb in [0, 40] {
                stream.slice {
                    $0.frameNum = 1
                    $0.refIdc = 0
                    $0.firstMb = mb
                }
            }
        }
        #expect(stream.shapes() == [[.sps, .pps, .idr], [.slice, .slice], [.slice, .slice]])
    }

    @Test func arbitrarySliceOrderIsOnePicture() {
        var stream = StreamBuilder()
        stream.sps.profileIdc = 66
        stream.parameterSets()
        for mb in [50, 0, 20] { stream.slice { $0.firstMb = mb } }
        for mb in [20, 0] {
            stream.slice {
                $0.firstMb = mb
                $0.frameNum = 1
            }
        }
        #expect(stream.shapes() == [[.sps, .pps, .slice, .slice, .slice], [.slice, .slice]])
    }

    @Test func separateColourPlanesShareAPicture() {
        var stream = StreamBuilder()
        stream.sps.profileIdc = 244
        stream.sps.chromaFormatIdc = 3
        stream.sps.separateColourPlane = true
        stream.parameterSets()
        for frame in 0..<2 {
            for plane in 0..<3 {
                stream.slice {
                    $0.colourPlaneId = plane
                    $0.frameNum = frame
                    $0.pocLsb = 2 * frame
                }
            }
        }
        #expect(stream.shapes() == [[.sps, .pps, .slice, .slice, .slice], [.slice, .slice, .slice]])
    }

    @Test func slicesWithUnknownParameterSetsAreKept() {
        var stream = StreamBuilder()
        stream.slice { $0.type = .idr }  // before any SPS/PPS
        stream.slice {
            $0.type = .idr
            $0.firstMb = 30
        }
        stream.slice { $0.frameNum = 1 }
        stream.parameterSets()
        stream.slice {
            $0.frameNum = 2
            $0.ppsId = 9  // never sent
        }
        stream.slice { $0.frameNum = 2 }
        let (units, assembler) = stream.assemble()
        #expect(units.map { $0.nalUnits.map(\.type) } == [[.idr, .idr], [.slice], [.sps, .pps, .slice], [.slice]])
        #expect(assembler.slicesWithUnknownParameterSets == 4)
        #expect(assembler.malformedUnits == 0)
        #expect(units[0].primarySliceType == .p && units[0].ppsId == 0 && units[0].spsId == nil)
    }

    @Test func malformedUnitsAreCountedAndPassedOn() {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.add(.sps, [0x64])
        stream.add(.sei, [5, 200, 1, 2])
        stream.slice { $0.type = .idr }
        stream.units.append(NALUnit(bytes: [0x41]))  // a slice with no header bytes at all
        let (units, assembler) = stream.assemble()
        #expect(units.map { $0.nalUnits.map(\.type) } == [[.sps, .pps, .sps, .sei, .idr, .slice]])
        #expect(assembler.malformedUnits == 3)
        #expect(assembler.lastError?.code == .invalidData)
        #expect(assembler.parameterSets.sps[0] != nil)
    }

    @Test func recoveryPointMakesARandomAccessPointWithoutIDR() {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.add(.sei, [5, 2, 0xAA, 0xBB] + [6, 1, 0b0101_1000, 0x80])  // user data, then recovery_frame_cnt 1
        stream.slice { $0.sliceType = 2 }
        let units = stream.assemble().units
        #expect(units.count == 1)
        #expect(units[0].isRandomAccessPoint && !units[0].isIDR)
        #expect(units[0].recoveryPoint?.recoveryFrameCount == 1)
        #expect(units[0].recoveryPoint?.exactMatch == true)
    }

    @Test func finishThenNewStream() {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.slice { $0.type = .idr }
        var assembler = AccessUnitAssembler()
        var count = 0
        for unit in stream.units { assembler.push(unit) { _ in count += 1 } }
        assembler.finish { _ in count += 1 }
        #expect(count == 1)
        // Same picture header again: a new stream, so a new access unit.
        assembler.push(stream.units[2]) { _ in count += 1 }
        assembler.finish { _ in count += 1 }
        #expect(count == 2)
        #expect(assembler.parameterSets.pps[0] != nil)
        assembler.reset()
        #expect(assembler.parameterSets.pps.isEmpty)
    }

    @Test func annexBOutputUsesFourByteStartCodes() {
        let unit = AccessUnit(nalUnits: [NALUnit(bytes: [0x09, 0xF0]), NALUnit(bytes: [0x65, 1, 2])])
        #expect(unit.annexB() == [0, 0, 0, 1, 0x09, 0xF0, 0, 0, 0, 1, 0x65, 1, 2])
        #expect(unit.byteCount == 5)
    }
}

@Suite(.timeLimit(.minutes(10))) struct SEITests {
    @Test func messageHeadersWithExtensionBytes() throws {
        let payload = Array(repeating: UInt8(0x42), count: 300)
        let rbsp: [UInt8] = [0xFF, 0xFF, 10, 0xFF, 45] + payload + [6, 1, 0x80] + [0x80]
        let messages = try SEIMessage.messages(inRBSP: rbsp)
        #expect(messages.map(\.payloadType) == [520, 6])
        #expect(messages[0].payload == payload)
        #expect(try RecoveryPoint(payload: messages[1].payload).recoveryFrameCount == 0)
    }

    @Test func truncatedMessagesThrow() {
        #expect(throws: BitstreamError.self) { try SEIMessage.messages(inRBSP: [5, 10, 1, 2, 3]) }
        #expect(throws: BitstreamError.self) { try SEIMessage.messages(inRBSP: [0xFF, 0xFF]) }
        #expect(throws: BitstreamError.self) { try SEIMessage.messages(in: NALUnit(bytes: [0x67])) }
    }

    @Test func emptyAndPaddedSEI() throws {
        #expect(try SEIMessage.messages(inRBSP: [0x80]).isEmpty)
        #expect(try SEIMessage.messages(inRBSP: [1, 1, 0x80, 0x80, 0, 0]).map(\.payload) == [[0x80]])
        let nal = NALUnit(bytes: [0x06, 5, 3, 0, 0, 3, 1, 0x80])  // emulation prevention inside a payload
        #expect(try SEIMessage.messages(in: nal).first?.payload == [0, 0, 1])
    }
}
