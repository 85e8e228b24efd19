import Foundation
import H265
import TestSupport
import Testing
import VideoCoding

@Suite(.timeLimit(.minutes(10))) struct RandomAccessTests {
    static func verdicts(_ units: [AccessUnit]) -> (verdicts: [RandomAccess.Verdict], access: RandomAccess) {
        var access = RandomAccess()
        return (units.map { access.verdict(for: $0) }, access)
    }

    /// open_gop_176x144.265 from its third VPS on: the stream starts at a CRA (IDR, CRA, CRA,
    /// CRA are its IRAP pictures), whose three RASL pictures refer to pictures before it.
    static func fromSecondCRA() throws -> [UInt8] {
        let units = try Streams.units("open_gop_176x144.265")
        let parameterSetStarts = units.indices.filter { units[$0].type == .vps }
        return AccessUnit(nalUnits: Array(units[parameterSetStarts[2]...])).annexB()
    }

    /// The same stream cut mid-GOP, after the first CRA's leading pictures, with its
    /// parameter sets in front: four trailing pictures come before the next IRAP.
    static func midGOP() throws -> [UInt8] {
        let units = try Streams.units("open_gop_176x144.265")
        let cra = try #require(units.firstIndex { $0.type == .cra })
        let firstTrailing = try #require(units[cra...].firstIndex { !$0.type.isRASL && $0.type != .cra })
        return AccessUnit(nalUnits: Array(units.prefix(3)) + Array(units[firstTrailing...])).annexB()
    }

    @Test func streamsThatStartAtAnIDRSkipNothing() throws {
        for name in ["open_gop_176x144.265", "radl_176x144.265", "main_bframes_176x144.265"] {
            let (verdicts, access) = Self.verdicts(try Streams.accessUnits(name).units)
            #expect(verdicts.allSatisfy { $0 == .decode }, "\(name)")
            #expect(access.skippedRASL == 0 && access.skippedBeforeRandomAccessPoint == 0)
        }
    }

    @Test func decodingThatStartsAtACRASkipsItsRASLPictures() throws {
        let bytes = try Self.fromSecondCRA()
        let units = Streams.accessUnits(bytes).units
        let (verdicts, access) = Self.verdicts(units)
        #expect(units.count == 17 && units.first?.isCRA == true)
        #expect(verdicts.prefix(4) == [.decode, .skipRASL, .skipRASL, .skipRASL])
        #expect(verdicts.dropFirst(4).allSatisfy { $0 == .decode })
        #expect(access.skippedRASL == 3 && access.skippedBeforeRandomAccessPoint == 0)
        // The next CRA's leading pictures would be decodable: it does not start decoding.
        #expect(units.filter(\.isCRA).count == 2)
        try expectFFmpegOutputs(units.count - 3, bytes)
    }

    /// Nothing before the first IRAP; that IRAP then starts decoding, so its RASL pictures go too.
    @Test func decodingThatStartsMidGOP() throws {
        let bytes = try Self.midGOP()
        let units = Streams.accessUnits(bytes).units
        let (verdicts, access) = Self.verdicts(units)
        #expect(units.count == 21)
        #expect(verdicts.prefix(8) == Array(repeating: .skipBeforeRandomAccessPoint, count: 4) + [.decode] + Array(repeating: .skipRASL, count: 3))
        #expect(access.skippedBeforeRandomAccessPoint == 4 && access.skippedRASL == 3)
        // libavcodec skips the same RASL pictures but decodes the four before the CRA against
        // references it makes up ("Could not find ref with POC 8"): 21 - 3 pictures.
        try expectFFmpegOutputs(units.count - 3, bytes)
    }

    @Test func radlPicturesAreDecodable() throws {
        let units = try Streams.units("radl_176x144.265")
        let secondIDR = units.indices.filter { units[$0].type == .vps }[1]
        let (verdicts, access) = Self.verdicts(Streams.accessUnits(AccessUnit(nalUnits: Array(units[secondIDR...])).annexB()).units)
        #expect(verdicts.allSatisfy { $0 == .decode } && access.skippedRASL == 0)
    }

    /// After an end of sequence a CRA starts a new coded video sequence: its RASL pictures go.
    /// A BLA's always do; an IDR has none.
    @Test func endOfSequenceAndBLA() {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.slice { $0.type = .idrNoLeadingPictures; $0.sliceType = 2 }
        stream.slice { $0.type = .cra; $0.sliceType = 2; $0.pocLsb = 8 }
        stream.slice { $0.type = .raslN; $0.pocLsb = 6 }
        stream.add(.endOfSequence)
        stream.slice { $0.type = .cra; $0.sliceType = 2; $0.pocLsb = 16 }
        stream.slice { $0.type = .raslR; $0.pocLsb = 14 }
        stream.slice { $0.type = .radlN; $0.pocLsb = 15 }
        stream.slice { $0.type = .blaWithLeadingPictures; $0.sliceType = 2; $0.pocLsb = 24 }
        stream.slice { $0.type = .raslN; $0.pocLsb = 22 }
        stream.slice { $0.pocLsb = 25 }
        let (verdicts, access) = Self.verdicts(stream.assemble().units)
        #expect(verdicts == [.decode, .decode, .decode, .decode, .skipRASL, .decode, .decode, .skipRASL, .decode])
        #expect(access.skippedRASL == 2)
    }

    @Test func restartWaitsForTheNextIRAP() {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.slice { $0.type = .idrNoLeadingPictures; $0.sliceType = 2 }
        stream.slice { $0.pocLsb = 1 }
        let units = stream.assemble().units
        var access = RandomAccess()
        #expect(units.map { access.verdict(for: $0) } == [.decode, .decode])
        access.restart()
        #expect(access.verdict(for: units[1]) == .skipBeforeRandomAccessPoint)
        #expect(access.verdict(for: units[0]) == .decode && access.verdict(for: units[1]) == .decode)
        #expect(access.skippedBeforeRandomAccessPoint == 1)
        // A unit without a picture passes: its parameter sets matter.
        #expect(access.verdict(for: AccessUnit(nalUnits: [stream.sps.nal])) == .decode)
    }

    /// recovery_point SEI payloads (§D.2.8): recovery_poc_cnt is signed.
    @Test func recoveryPointPayloads() throws {
        let three = try RecoveryPoint(payload: [0x35])  // se 3 = 00110, exact 1, broken 0, alignment 1
        #expect(three.recoveryPOCCount == 3 && three.exactMatch && !three.brokenLink)
        let minusTwo = try RecoveryPoint(payload: [0x2D])  // se -2 = 00101, exact 1, broken 0
        #expect(minusTwo.recoveryPOCCount == -2)
        #expect(try RecoveryPoint(payload: [0xD0]).recoveryPOCCount == 0)
        #expect(throws: BitstreamError.self) { try RecoveryPoint(payload: [0x00]) }
        // The unit tests' SEI builder writes what the parser reads.
        let sei = HEVCEdits.recoveryPointSEI(pocCount: 9)
        let nal = try #require(NALUnit(bytes: sei))
        let message = try #require(try SEIMessage.messages(in: nal).first)
        #expect(message.payloadType == SEIMessage.recoveryPointType)
        #expect(try RecoveryPoint(payload: message.payload).recoveryPOCCount == 9)
    }

    /// How many pictures the ffmpeg CLI decodes from the bytes, when it is installed.
    private func expectFFmpegOutputs(_ expected: Int, _ bytes: [UInt8]) throws {
        guard let ffmpeg = Streams.ffmpeg else { return }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("h265tests-\(UUID().uuidString).265")
        try Data(bytes).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let lines = String(
            decoding: try runProgram(ffmpeg, ["-nostdin", "-loglevel", "quiet", "-f", "hevc", "-i", file.path, "-f", "framecrc", "-"]),
            as: UTF8.self)
        #expect(lines.split(separator: "\n").filter { !$0.hasPrefix("#") }.count == expected)
    }
}

/// The reader's verdicts do not depend on whether an access unit was ended by the next unit
/// arriving whole or, early, by its first bytes (`nextUnitEndsAccessUnit`, what a live decoder
/// does at the end of each received piece). Found by the stream-front fuzz target: a picture
/// before its PPS, read as the ffmpeg CLI does, was dropped when the PPS arrived whole and held
/// for the PPS when the PPS's first bytes ended it.
@Suite(.timeLimit(.minutes(10))) struct EarlyEndTests {
    enum Event: Equatable {
        case picture(keyframe: Bool, units: Int)
        case dropped(Int)
        case other(String)
    }

    static func events(_ units: [NALUnit], endingEarly: Bool) -> [Event] {
        var reader = ElementaryStreamReader(emulateFFmpegProbe: true)
        var events: [Event] = []
        let record: (ReaderEvent) -> Void = { event in
            switch event {
            case .accessUnit(let unit): events.append(.picture(keyframe: unit.isKeyframe, units: unit.nalUnits.count))
            case .droppedBeforeKeyframe(let count): events.append(.dropped(count))
            default: events.append(.other("\(event)"))
            }
        }
        for nal in units {
            if endingEarly, reader.nextUnitEndsAccessUnit(prefix: ArraySlice(nal.bytes.prefix(16))) { reader.endAccessUnit(record) }
            reader.push(AnnexBUnit(bytes: nal.bytes, streamOffset: nal.streamOffset), record)
        }
        reader.finish(record)
        return events
    }

    @Test func aPictureBeforeItsPPSIsJudgedAlikeWhicheverWayItsAccessUnitEnds() {
        var stream = StreamBuilder()
        stream.units += [stream.vps.nal, stream.sps.nal]
        stream.slice { $0.type = .idrWithRADL }
        stream.units.append(stream.pps.nal)
        stream.slice { $0.type = .idrWithRADL }
        stream.slice { $0.pocLsb = 1 }
        let whole = Self.events(stream.units, endingEarly: false)
        #expect(whole == Self.events(stream.units, endingEarly: true))
        #expect(whole.count == 3, "\(whole)")
    }
}
