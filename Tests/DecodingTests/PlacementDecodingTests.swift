@testable import Decoding
import Foundation
import HardwareTestSupport
import Testing
import TestSupport
import Timekeeping
import VideoCoding

/// `auto` decoding placed by capacity, end to end through `StreamDecoder` and
/// `BackendSupervisor`: pretend CUDA hardware (a software decoder inside that reports itself as
/// NVDEC), engines of set capacities, a clock that moves only when told.
@Suite(.timeLimit(.minutes(10))) struct PlacementDecodingTests {
    static let gpu = EngineID.device(.cuda(0))
    static let file = "repeat_headers_176x144.264"

    /// A pool of one pretend CUDA device whose placement has the given capacities (H.264) and
    /// lets sessions move at once.
    static func pool(gpu: Double, cpu: Double, clock: ManualClock = ManualClock()) -> HardwareDevicePool {
        let engines = EnginePlacer(placement: EnginePlacement(cores: 2, minimumStay: .zero), clock: clock)
        engines.setCapacity(EngineCapacity(fps: [.h264: gpu], source: "test"), of: Self.gpu)
        engines.setCapacity(EngineCapacity(fps: [.h264: cpu], source: "test"), of: .cpu)
        return HardwareDevicePool(platform: PretendPlatform(cuda: [0]), clock: clock, engines: engines)
    }

    static func report(_ pool: HardwareDevicePool) -> [EngineID: EnginePlacement.Report] {
        Dictionary(uniqueKeysWithValues: pool.engines.report().map { ($0.engine, $0) })
    }

    @Test func aRoomyDeviceTakesTheSession() throws {
        let pool = Self.pool(gpu: 1000, cpu: 10)
        let factory = PretendHardwareFactory()
        let decoder = try StreamDecoder(options: .placed(.auto, pool), factory: factory)
        let output = pushAll(try Fixtures.bytes(Self.file), into: decoder)
        #expect(decoder.backend == .cuda)
        #expect(decoder.backendReason.hasPrefix("NVDEC on cuda:0 (Pretend CUDA 0), placed by headroom: NVDEC on cuda:0 1000 of 1000"))
        #expect(factory.hardwareAccessUnits.value == 20)
        #expect(TestSupport.rawMD5(output.frames) == Fixtures.md5(Self.file))
        let report = Self.report(pool)
        #expect(report[Self.gpu]?.sessions == 1 && report[.cpu]?.sessions == 0)
        // 176x144 at the SPS's 25 fps.
        let expected: Double = 176.0 * 144.0 * 25.0 / (1920.0 * 1080.0)
        let load: Double = report[Self.gpu]?.loadFPS ?? 0
        #expect(abs(load - expected) < 1e-9)
    }

    /// The device is full: the session decodes on the CPU, which is not a fallback (nothing
    /// failed), and the reason says why.
    @Test func aFullDeviceLeavesTheSessionToTheCPU() throws {
        let pool = Self.pool(gpu: 0.1, cpu: 1000)
        let factory = PretendHardwareFactory()
        var decoder: StreamDecoder? = try StreamDecoder(options: .placed(.auto, pool), factory: factory)
        let output = pushAll(try Fixtures.bytes(Self.file), into: try #require(decoder))
        #expect(decoder?.backend == .software)
        #expect(decoder?.backendReason.hasPrefix("software: placed by headroom: NVDEC on cuda:0 0 of 0 fps") == true)
        #expect(decoder?.fallbacks.isEmpty == true)
        #expect(factory.hardwareAccessUnits.value == 0, "nothing reached the device")
        #expect(TestSupport.rawMD5(output.frames) == Fixtures.md5(Self.file))
        #expect(Self.report(pool)[.cpu]?.sessions == 1)
        #expect(pool.sessions(on: .cuda(0)) == 0, "the device's lease was given back")
        decoder = nil
        #expect(Self.report(pool)[.cpu]?.sessions == 0, "a closed decoder's load leaves its engine")
    }

    /// The device becomes overloaded mid-stream: the session moves to the CPU at its next
    /// keyframe (not before), and every picture is still there, exactly.
    @Test func anOverloadedDeviceGivesTheSessionAwayAtTheNextKeyframe() throws {
        let pool = Self.pool(gpu: 1000, cpu: 1000)
        let factory = PretendHardwareFactory()
        let decoder = try StreamDecoder(options: .placed(.auto, pool), factory: factory)
        var keyframes: [Int64] = []
        var frames: [DecodedFrame] = []
        let bytes = try Fixtures.bytes(Self.file)
        let errors = bytes.withUnsafeBytes { buffer in
            decoder.push(
                buffer,
                onAccessUnit: { unit in
                    if unit.unit.isKeyframe { keyframes.append(unit.index) }
                    // Measured again: the device turns out to decode far less than thought.
                    if unit.index == 1 {
                        pool.engines.setCapacity(EngineCapacity(fps: [.h264: 0.01], source: "test"), of: Self.gpu)
                    }
                },
                onPicture: { frame, _ in frames.append(frame) })
        }
        let finished = decoder.finish { frame, _ in frames.append(frame) }
        #expect(errors.isEmpty && finished.isEmpty)
        #expect(keyframes.count >= 2)
        let firstAfterOverload = try #require(keyframes.first { $0 > 1 })
        #expect(factory.hardwareAccessUnits.value == Int(firstAfterOverload), "the device decoded up to the keyframe")
        #expect(decoder.backend == .software)
        #expect(decoder.backendReason.hasPrefix("software: moved from NVDEC on cuda:0 at a keyframe: it was overloaded ("))
        #expect(decoder.fallbacks.isEmpty)
        #expect(TestSupport.rawMD5(frames) == Fixtures.md5(Self.file))
        let report = Self.report(pool)
        #expect(report[Self.gpu]?.movedAway == 1 && report[Self.gpu]?.sessions == 0 && report[.cpu]?.sessions == 1)
        #expect(pool.sessions(on: .cuda(0)) == 0)
    }

    /// A required back end is what it says: counted in its engine's load, never moved.
    @Test func aRequiredBackendIsCountedButNotPlaced() throws {
        let pool = Self.pool(gpu: 0.01, cpu: 1000)
        let factory = PretendHardwareFactory()
        let decoder = try StreamDecoder(options: .placed(.cuda, pool), factory: factory)
        let output = pushAll(try Fixtures.bytes(Self.file), into: decoder)
        #expect(decoder.backend == .cuda)
        #expect(decoder.backendReason == "NVDEC on cuda:0 (Pretend CUDA 0)")
        #expect(factory.hardwareAccessUnits.value == 20)
        #expect(TestSupport.rawMD5(output.frames) == Fixtures.md5(Self.file))
        let report = Self.report(pool)
        #expect(report[Self.gpu]?.sessions == 1 && report[Self.gpu]?.movedAway == 0)
        #expect((report[Self.gpu]?.utilization ?? 0) > 1)
    }

    /// A decoder outside a server (the CLI's file, a catch-up) is neither placed nor counted.
    @Test func unplacedDecodersTakeTheFirstBackEndThatWorks() throws {
        let pool = Self.pool(gpu: 0.01, cpu: 1000)
        let factory = PretendHardwareFactory()
        let decoder = try StreamDecoder(options: .pretend(.auto, pool.platform, pool: pool), factory: factory)
        _ = pushAll(try Fixtures.bytes(Self.file), into: decoder)
        #expect(decoder.backend == .cuda && decoder.backendReason == "NVDEC on cuda:0 (Pretend CUDA 0)")
        #expect(pool.engines.report().allSatisfy { $0.sessions == 0 })
    }

    /// Without a device, `auto` sessions are on the CPU with the reason selection gave.
    @Test func withoutHardwareTheCPUCarriesTheLoad() throws {
        let clock = ManualClock()
        let engines = EnginePlacer(placement: EnginePlacement(cores: 2), clock: clock)
        let pool = HardwareDevicePool(platform: NoHardware(), clock: clock, engines: engines)
        let decoder = try StreamDecoder(options: .placed(.auto, pool))
        _ = pushAll(try Fixtures.bytes(Self.file), into: decoder)
        #expect(decoder.backend == .software)
        #expect(decoder.backendReason.hasPrefix("software: CUDA unavailable"))
        let cpu = try #require(pool.engines.report().first)
        #expect(cpu.engine == .cpu && cpu.sessions == 1)
        let defaults: [VideoCodec: Double] = [.h264: 177, .h265: 115.5]
        #expect(cpu.capacity.fps == defaults, "2 cores × 0.75 × 118 and 77")
    }
}

extension DecoderOptions {
    /// A server's live decoder on `pool`'s pretend machine: placed by capacity.
    static func placed(_ backend: DecoderBackendChoice, _ pool: HardwareDevicePool) -> DecoderOptions {
        var options = DecoderOptions.pretend(backend, pool.platform, pool: pool)
        options.placedByCapacity = true
        return options
    }
}
