@testable import Decoding
import Testing
import VideoCoding

/// `EnginePlacement` alone: pretend engines of set capacities, time given with each event.
@Suite(.timeLimit(.minutes(10))) struct EnginePlacementTests {
    static let gpu = EngineID.device(.cuda(0))
    static let second = 1_000_000_000 as UInt64

    /// A GPU of 1,200 fps of 1080p H.264 (`h265` of H.265) and a CPU of 600 (`cpuH265`).
    static func machine(h265: Double = 1400, cpuH265: Double = 300) -> EnginePlacement {
        var placement = EnginePlacement(cores: 16)
        placement.setCapacity(EngineCapacity(fps: [.h264: 1200, .h265: h265], source: "test"), of: gpu)
        placement.setCapacity(EngineCapacity(fps: [.h264: 600, .h265: cpuH265], source: "test"), of: .cpu)
        return placement
    }

    static func hd(_ codec: VideoCodec = .h264, fps: Double? = 30) -> EngineDemand {
        EngineDemand(codec: codec, width: 1920, height: 1080, frameRate: fps)
    }

    @Test func demandIsIn1080pEquivalentPictures() {
        #expect(Self.hd().fps1080 == 30)
        #expect(EngineDemand(codec: .h264, width: 3840, height: 2160, frameRate: 30).fps1080 == 120)
        #expect(EngineDemand(codec: .h264, width: 1920, height: 1080, frameRate: nil).frameRate == 30, "assumed without VUI timing")
    }

    /// 1080p30 sessions go where the headroom is largest: the GPU alone until its headroom is
    /// down to the CPU's, then both in turn, until both are full.
    @Test func sessionsFillTheGPUThenShareByHeadroom() {
        var placement = Self.machine()
        var engines: [EngineID] = []
        for _ in 0..<60 {
            engines.append(placement.place(Self.hd(), candidates: [Self.gpu, .cpu], now: 0).decision.engine)
        }
        #expect(engines.prefix(20).allSatisfy { $0 == Self.gpu }, "the GPU has more headroom until it is half full")
        #expect(engines.filter { $0 == Self.gpu }.count == 40)
        #expect(engines.filter { $0 == .cpu }.count == 20)
        let report = Dictionary(uniqueKeysWithValues: placement.report().map { ($0.engine, $0) })
        #expect(report[Self.gpu]?.loadFPS == 1200 && report[Self.gpu]?.sessions == 40)
        #expect(report[.cpu]?.loadFPS == 600 && report[.cpu]?.sessions == 20)
        #expect(abs((report[Self.gpu]?.utilization ?? 0) - 1) < 1e-9 && abs((report[.cpu]?.utilization ?? 0) - 1) < 1e-9)
    }

    @Test func theReasonNamesEveryCandidatesHeadroom() {
        var placement = Self.machine()
        let first = placement.place(Self.hd(), candidates: [Self.gpu, .cpu], now: 0).decision
        #expect(
            first.reason
                == "placed by headroom: NVDEC on cuda:0 1200 of 1200 fps (1080p H.264) left, the CPU 600 of 600 fps (1080p H.264) left")
        let pinned = placement.place(Self.hd(), candidates: [.cpu], movable: false, now: 0).decision
        #expect(pinned == .init(engine: .cpu, reason: "the only engine for it"))
    }

    /// Headroom is per codec: a GPU half full of H.264 has half of its H.265 capacity left.
    @Test func hevcAndH264HaveTheirOwnCapacities() {
        var placement = Self.machine(h265: 400, cpuH265: 600)
        for _ in 0..<20 { _ = placement.place(Self.hd(), candidates: [Self.gpu], now: 0) }
        #expect(abs(placement.utilization(of: Self.gpu) - 0.5) < 1e-9)
        #expect(abs(placement.headroom(of: Self.gpu, for: .h264) - 600) < 1e-6)
        #expect(abs(placement.headroom(of: Self.gpu, for: .h265) - 200) < 1e-6)
        #expect(placement.place(Self.hd(.h265), candidates: [Self.gpu, .cpu], now: 0).decision.engine == .cpu)
        #expect(placement.place(Self.hd(.h264), candidates: [Self.gpu, .cpu], now: 0).decision.engine == Self.gpu)
        // An H.265 1080p30 session takes 30/600 of the CPU, which leaves 570 of H.264.
        #expect(abs(placement.headroom(of: .cpu, for: .h264) - 570) < 1e-6)
    }

    /// Sessions that send what they said stay put, keyframe after keyframe.
    @Test func noMoveWithoutOverload() {
        var placement = Self.machine()
        let sessions = (0..<40).map { _ in placement.place(Self.hd(), candidates: [Self.gpu, .cpu], now: 0).session }
        var now: UInt64 = 0
        for picture in 0..<600 {
            now += Self.second / 30
            for session in sessions {
                #expect(placement.accessUnit(session, isKeyframe: picture % 30 == 0, now: now) == .stay)
            }
        }
        #expect(placement.report().map(\.movedAway) == [0, 0])
    }

    /// The GPU was filled by streams that said 30 fps and send 90: it is overloaded once their
    /// rate is measured, and sessions leave it at their next keyframe (never between), each
    /// only when the CPU has room for it, until the GPU is no longer overloaded.
    @Test func overloadMovesSessionsAtTheirNextKeyframeOnly() throws {
        var placement = Self.machine()
        placement.minimumStay = 10 * Self.second
        let sessions = (0..<20).map { _ in placement.place(Self.hd(fps: 30), candidates: [Self.gpu, .cpu], now: 0).session }
        #expect(sessions.allSatisfy { placement.engine(of: $0) == Self.gpu })
        placement.setCapacity(EngineCapacity(fps: [.h264: 50], source: "test"), of: .cpu)
        var now: UInt64 = 0
        var moves: [UInt64: EnginePlacement.Action] = [:]
        func send(pictures: ClosedRange<Int>, keyframe: (Int) -> Bool) {
            for picture in pictures {
                now = UInt64(picture) * Self.second / 90
                for session in sessions {
                    let action = placement.accessUnit(session, isKeyframe: keyframe(picture), now: now)
                    if action != .stay {
                        #expect(keyframe(picture), "moved between keyframes")
                        #expect(now >= 10 * Self.second, "moved within its minimum stay")
                        moves[session] = action
                    }
                }
            }
        }
        // 12 s at 90 fps, a keyframe each second: 20 × 90 = 1,800 on a GPU of 1,200, but a CPU
        // of 50 has no room for a session of 90.
        send(pictures: 1...1080) { $0 % 90 == 0 }
        #expect(moves.isEmpty)
        #expect(abs(placement.utilization(of: Self.gpu) - 1.5) < 0.01)

        // A CPU of 1,800 has room: the GPU sheds sessions at their next keyframe, as many as it
        // takes to be within its capacity again (7: 13 × 90 = 1,170).
        placement.setCapacity(EngineCapacity(fps: [.h264: 1800], source: "test"), of: .cpu)
        send(pictures: 1081...1120) { _ in false }
        #expect(moves.isEmpty, "nothing moves before a keyframe")
        send(pictures: 1121...1180) { $0 == 1140 }
        #expect(moves.count == 7)
        let first = try #require(moves.values.first)
        guard case .move(let to, let reason) = first else { return }
        #expect(to == .cpu)
        #expect(reason.hasPrefix("moved from NVDEC on cuda:0 at a keyframe: it was overloaded ("))
        #expect(placement.utilization(of: Self.gpu) <= 1)
        #expect(placement.report().first { $0.engine == Self.gpu }?.movedAway == 7)
        #expect(placement.report().first { $0.engine == .cpu }?.sessions == 7)

        // No longer overloaded: later keyframes move nothing.
        moves = [:]
        send(pictures: 1181...1400) { $0 % 90 == 0 }
        #expect(moves.isEmpty)
    }

    /// A stream that went silent (a camera gone, a push paused) loads nothing until it sends
    /// again, and then its rate is measured afresh, not over the silence.
    @Test func aSilentSessionLoadsNothingUntilItSendsAgain() throws {
        var placement = Self.machine()
        let session = placement.place(Self.hd(fps: nil), candidates: [Self.gpu, .cpu], now: 0).session
        func gpuLoad() -> Double { placement.report().first { $0.engine == Self.gpu }?.loadFPS ?? -1 }
        for picture in 1...60 { _ = placement.accessUnit(session, isKeyframe: false, now: UInt64(picture) * Self.second / 30) }
        #expect(abs(gpuLoad() - 30) < 0.01)
        placement.advance(to: 8 * Self.second)
        #expect(gpuLoad() == 0)
        #expect(placement.report().first { $0.engine == Self.gpu }?.sessions == 1, "still placed there")
        let resumed = 8 * Self.second
        for picture in 1...90 { _ = placement.accessUnit(session, isKeyframe: false, now: resumed + UInt64(picture) * Self.second / 30) }
        #expect(abs(gpuLoad() - 30) < 1)
    }

    /// A required back end's session counts in the load and never moves.
    @Test func pinnedSessionsNeverMove() {
        var placement = Self.machine()
        placement.minimumStay = 0
        let pinned = placement.place(Self.hd(fps: 30), candidates: [Self.gpu], movable: false, now: 0).session
        placement.setCapacity(EngineCapacity(fps: [.h264: 10], source: "test"), of: Self.gpu)
        #expect(abs(placement.utilization(of: Self.gpu) - 3) < 1e-9)
        #expect(placement.accessUnit(pinned, isKeyframe: true, now: 5 * Self.second) == .stay)
        placement.release(pinned)
        #expect(placement.utilization(of: Self.gpu) == 0)
    }

    @Test func capacityOverridesParseAndReplaceTheDefaults() throws {
        let overrides = try EngineCapacityOverrides(parsing: "cuda:0:h264=1000, cpu:hevc=250,/dev/dri/renderD128:h265=90")
        #expect(overrides.entries[Self.gpu] == [.h264: 1000])
        #expect(overrides.entries[.cpu] == [.h265: 250])
        #expect(overrides.entries[.device(.renderNode("/dev/dri/renderD128"))] == [.h265: 90])
        var placement = EnginePlacement(cores: 4, overrides: overrides)
        _ = placement.place(Self.hd(), candidates: [Self.gpu, .cpu], now: 0)
        let report = Dictionary(uniqueKeysWithValues: placement.report().map { ($0.engine, $0.capacity) })
        #expect(report[Self.gpu]?.fps == [.h264: 1000, .h265: EngineCapacity.nvdec.fps[.h265]!])
        #expect(report[.cpu]?.fps == [.h264: 118 * 3, .h265: 250], "4 cores × 0.75 × 118")
        #expect(report[.cpu]?.source == "configured")

        for bad in ["cpu", "cpu:h264", "gpu:h264=1", "cpu:vp9=1", "cpu:h264=-1", "cpu:h264=fast", "cuda:0:h264=1,"] {
            #expect(throws: DecodeError.self, "\(bad)") { try EngineCapacityOverrides(parsing: bad) }
        }
    }
}
