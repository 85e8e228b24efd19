import H265
import Testing
import VideoCoding

@Suite(.timeLimit(.minutes(10))) struct AccessUnitTests {
    /// Two pictures of three slice segments each, the second and third of the second picture
    /// dependent segments.
    static func twoPictures() -> StreamBuilder {
        var stream = StreamBuilder()
        stream.pps.dependentSliceSegments = true
        stream.parameterSets()
        for (index, address) in [0, 30, 60].enumerated() {
            stream.slice {
                $0.type = .idrWithRADL
                $0.sliceType = 2
                $0.first = index == 0
                $0.address = address
            }
        }
        for (index, address) in [0, 30, 60].enumerated() {
            stream.slice {
                $0.first = index == 0
                $0.dependent = index > 0
                $0.address = address
                $0.pocLsb = 1
            }
        }
        return stream
    }

    @Test func slicesAndDependentSegmentsStayWithTheirPicture() {
        let stream = Self.twoPictures()
        let (units, assembler) = stream.assemble()
        #expect(units.map { $0.nalUnits.map(\.type) } == [
            [.vps, .sps, .pps, .idrWithRADL, .idrWithRADL, .idrWithRADL], [.trailR, .trailR, .trailR],
        ])
        #expect(units[0].isIDR && units[0].isIRAP && units[0].sliceType == .i && units[0].picOrderCntLsb == 0)
        #expect(units[1].pictureType == .trailR && units[1].sliceType == .p && units[1].picOrderCntLsb == 1)
        #expect(units.allSatisfy { $0.ppsId == 0 && $0.spsId == 0 && $0.temporalId == 0 && $0.hasPicture })
        #expect(units[1].streamOffset == stream.annexB.count - units[1].annexB().count + 4)
        #expect(assembler.accessUnitCount == 2 && assembler.malformedUnits == 0)
    }

    /// §7.4.2.4.4: after a picture, these types open the next access unit; the others stay.
    @Test(arguments: NALUnitType.allCases.filter { !$0.isVCL })
    func nonVCLUnitAfterAPicture(_ type: NALUnitType) {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.slice { $0.type = .idrNoLeadingPictures; $0.sliceType = 2 }
        stream.add(type, type == .vps || type == .sps || type == .pps ? [] : [0x80])
        if [.vps, .sps, .pps].contains(type) {
            // A real set, so the stream stays valid: the same one again.
            stream.units.removeLast()
            stream.units.append(type == .vps ? stream.vps.nal : type == .sps ? stream.sps.nal : stream.pps.nal)
        }
        stream.slice { $0.pocLsb = 1 }
        let opens: Set<UInt8> = [32, 33, 34, 35, 39, 41, 42, 43, 44, 48, 49, 50, 51, 52, 53, 54, 55]
        if opens.contains(type.rawValue) {
            #expect(stream.shapes() == [[.vps, .sps, .pps, .idrNoLeadingPictures], [type, .trailR]])
        } else {
            #expect(stream.shapes() == [[.vps, .sps, .pps, .idrNoLeadingPictures, type], [.trailR]])
        }
    }

    /// Whatever follows an end of sequence starts a new access unit, suffix SEI included,
    /// except an end of bitstream, which ends the one it joins.
    @Test func endOfSequenceAndOfBitstream() {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.slice { $0.type = .idrNoLeadingPictures; $0.sliceType = 2 }
        stream.add(.endOfSequence)
        stream.add(.suffixSEI)
        stream.slice { $0.type = .cra; $0.sliceType = 2 }
        stream.add(.endOfSequence)
        stream.add(.endOfBitstream)
        stream.add(.fillerData)
        #expect(stream.shapes() == [
            [.vps, .sps, .pps, .idrNoLeadingPictures, .endOfSequence], [.suffixSEI, .cra, .endOfSequence, .endOfBitstream],
            [.fillerData],
        ])
        let units = stream.assemble().units
        #expect(units[0].endsSequence && units[1].endsSequence && !units[2].hasPicture)
    }

    @Test func unitsOfOtherLayersAreLeftOut() {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.add(.vps, [0x80], layerId: 1)
        stream.slice { $0.type = .idrNoLeadingPictures; $0.sliceType = 2 }
        // A first slice of layer 1 is no new picture of the base layer.
        stream.slice { $0.type = .idrNoLeadingPictures; $0.sliceType = 2; $0.layerId = 1 }
        stream.add(.aud, [0x50], layerId: 2)
        stream.slice { $0.pocLsb = 1 }
        let (units, assembler) = stream.assemble()
        #expect(units.map { $0.nalUnits.map(\.type) } == [[.vps, .sps, .pps, .idrNoLeadingPictures], [.trailR]])
        #expect(units.allSatisfy { $0.nalUnits.allSatisfy { $0.layerId == 0 } })
        #expect(assembler.unitsOutsideBaseLayer == 3)
        // Nor do their first bytes end an access unit early.
        var assemblerWithPicture = AccessUnitAssembler()
        for unit in stream.units.prefix(5) { assemblerWithPicture.push(unit) { _ in } }
        #expect(!assemblerWithPicture.nextUnitEndsAccessUnit(prefix: ArraySlice(stream.units[5].bytes)))
        #expect(!assemblerWithPicture.nextUnitEndsAccessUnit(prefix: ArraySlice(stream.units[6].bytes)))
        #expect(assemblerWithPicture.nextUnitEndsAccessUnit(prefix: ArraySlice(stream.units[7].bytes.prefix(3))))
    }

    /// A layer id rewritten into a real stream's headers: those units go, the rest stays as it was.
    @Test func rewrittenLayerIdInARealStream() throws {
        let units = try Streams.units("main10_320x240.265")
        let suffixIndex = try #require(units.firstIndex { $0.type == .trailR || $0.type == .trailN })
        var rewritten = units
        var bytes = Array(units[suffixIndex].bytes)
        bytes[1] |= 0x08  // nuh_layer_id 1
        rewritten[suffixIndex] = NALUnit(bytes: bytes)!
        let (withLayer, assembler) = Streams.accessUnits(AccessUnit(nalUnits: rewritten).annexB())
        let (plain, _) = Streams.accessUnits(AccessUnit(nalUnits: units).annexB())
        #expect(assembler.unitsOutsideBaseLayer == 1)
        // That picture had one slice: it is gone, the others are as they were.
        #expect(withLayer.count == plain.count - 1)
        let unitCount = { (units: [AccessUnit]) -> Int in units.reduce(0) { $0 + $1.nalUnits.count } }
        #expect(unitCount(withLayer) == unitCount(plain) - 1)
    }

    /// A stream that begins in the middle of a picture: its segments join the next picture's
    /// access unit, as libavcodec's parser has it (and its decoder drops them).
    @Test func segmentsBeforeTheFirstPictureStartJoinIt() {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.slice { $0.first = false; $0.address = 40; $0.pocLsb = 7 }
        stream.add(.aud, [0x50])
        stream.slice { $0.type = .cra; $0.sliceType = 2; $0.pocLsb = 8 }
        stream.slice { $0.pocLsb = 9 }
        let units = stream.assemble().units
        #expect(units.map { $0.nalUnits.map(\.type) } == [[.vps, .sps, .pps, .trailR, .aud, .cra], [.trailR]])
        #expect(units[0].pictureType == .cra && units[0].picOrderCntLsb == 8 && units[0].sliceType == .i)
    }

    @Test func slicesWithUnknownParameterSetsAreCountedAndKept() {
        var stream = StreamBuilder()
        stream.slice { $0.type = .idrNoLeadingPictures; $0.sliceType = 2; $0.ppsId = 9 }
        stream.slice { $0.ppsId = 9; $0.pocLsb = 1 }
        let (units, assembler) = stream.assemble()
        #expect(units.count == 2 && units.allSatisfy { $0.hasPicture && $0.sliceType == nil && $0.ppsId == 9 && $0.sps == nil })
        #expect(assembler.slicesWithUnknownParameterSets == 2 && assembler.malformedUnits == 0)
    }

    @Test func aForbiddenHeaderIsCountedButKeptInPlace() {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.slice { $0.type = .idrNoLeadingPictures; $0.sliceType = 2 }
        stream.units.append(NALUnit(bytes: [0x4E, 0x00, 0x05, 0x80])!)  // prefix SEI, temporal id plus 1 = 0
        stream.slice { $0.pocLsb = 1 }
        let (units, assembler) = stream.assemble()
        #expect(units.map(\.nalUnits.count) == [4, 2])
        #expect(assembler.malformedUnits == 1)
    }

    /// Each access unit carries the parameter sets as of its end: a replaced SPS does not reach
    /// back into the pictures before it.
    @Test func eachUnitHasTheSetsItsPictureUses() {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.slice { $0.type = .idrNoLeadingPictures; $0.sliceType = 2 }
        stream.sps.width = 640
        stream.parameterSets()
        stream.slice { $0.type = .idrNoLeadingPictures; $0.sliceType = 2 }
        let units = stream.assemble().units
        #expect(units.map { $0.sps?.codedWidth } == [320, 640])
        #expect(units.map { $0.parameterSets.units(forPPS: 0)?.sps.bytes } == [SPSBuilder().nal.bytes, stream.sps.nal.bytes])
    }

    /// The early end: once the first bytes of the next picture's unit are in, the picture comes
    /// out, before that unit is complete.
    @Test func pictureComesOutWhenTheNextOneStarts() throws {
        let stream = Self.twoPictures()
        let bytes = stream.annexB
        // The second picture's start code: after the parameter sets and the first picture's three segments.
        let secondStart = stream.units.prefix(6).reduce(0) { $0 + 4 + $1.bytes.count }
        var splitter = AnnexBSplitter()
        var assembler = AccessUnitAssembler()
        var out: [AccessUnit] = []
        splitter.push(Array(bytes.prefix(secondStart + 6))) { event in
            if case .unit(let unit) = event, let nal = NALUnit(unit) { assembler.push(nal) { out.append($0) } }
        }
        #expect(out.isEmpty)
        let prefix = try #require(splitter.pendingUnitPrefix)
        #expect(prefix.count == 2 && !assembler.nextUnitEndsAccessUnit(prefix: prefix))  // header only: not yet
        splitter.push([bytes[secondStart + 6]]) { _ in }
        let longer = try #require(splitter.pendingUnitPrefix)
        #expect(assembler.nextUnitEndsAccessUnit(prefix: longer))
        assembler.endAccessUnit { out.append($0) }
        #expect(out.count == 1 && out[0].nalUnits.count == 6)
    }

    /// An oversized unit dropped by the splitter: where access units end does not depend on how
    /// the bytes came, and the rest of a picture whose first segment was dropped stays together.
    @Test func droppedFirstSegment() {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.slice { $0.type = .idrNoLeadingPictures; $0.sliceType = 2 }
        var big = Array(SliceBuilder().nal(sps: stream.sps, pps: stream.pps).bytes)
        big += Array(repeating: 0x5A, count: 3000)
        stream.units.append(NALUnit(bytes: big)!)
        stream.slice { $0.first = false; $0.address = 40; $0.pocLsb = 1 }
        stream.add(.aud, [0x50])
        stream.slice { $0.pocLsb = 2 }
        let bytes = stream.annexB
        let whole = Streams.accessUnits(bytes, maxNALBytes: 1000).units.map { $0.nalUnits.map(\.type) }
        #expect(whole == [[.vps, .sps, .pps, .idrNoLeadingPictures], [.trailR], [.aud, .trailR]])
        for pieces in [1, 5, 16, 333] {
            let chunked = Streams.accessUnits(bytes, pieces: pieces, maxNALBytes: 1000).units.map { $0.nalUnits.map(\.type) }
            #expect(chunked == whole, "\(pieces)-byte pieces")
        }
    }

    @Test func chunkingNeverChangesTheUnits() {
        var stream = Self.twoPictures()
        stream.add(.suffixSEI)
        stream.add(.endOfSequence)
        stream.slice { $0.type = .cra; $0.sliceType = 2 }
        stream.add(.endOfBitstream)
        let whole = stream.shapes()
        for pieces in [1, 2, 3, 5, 8, 64] {
            #expect(stream.shapes(pieces: pieces) == whole, "\(pieces)-byte pieces")
        }
    }

    @Test func finishAndReset() {
        var assembler = AccessUnitAssembler()
        var out: [AccessUnit] = []
        for unit in Self.twoPictures().units { assembler.push(unit) { out.append($0) } }
        assembler.finish { out.append($0) }
        #expect(out.count == 2 && !assembler.parameterSets.sps.isEmpty)
        assembler.finish { out.append($0) }
        #expect(out.count == 2)
        assembler.reset()
        #expect(assembler.parameterSets.sps.isEmpty && assembler.accessUnitCount == 0)
    }
}
