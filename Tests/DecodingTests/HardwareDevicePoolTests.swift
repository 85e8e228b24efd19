import Decoding
import Foundation
import HardwareTestSupport
import Testing
import TestSupport
import Timekeeping

/// The device pool and back-end selection on pretend machines: no GPU needed.
@Suite(.timeLimit(.minutes(10))) struct HardwareDevicePoolTests {
    @Test func oneContextPerDeviceHoweverManyDecoders() throws {
        let platform = PretendPlatform(cuda: [0])
        let pool = HardwareDevicePool(platform: platform, clock: SystemClock())
        var leases = try (0..<5).map { _ in try pool.lease(among: [.cuda(0)]).get() }
        #expect(platform.opens(of: .cuda(0)) == 1)
        #expect(pool.sessions(on: .cuda(0)) == 5)
        leases.removeAll()
        #expect(pool.sessions(on: .cuda(0)) == 0)
        // Kept open: the next session does not pay for a new context.
        #expect(pool.usage().first?.state == .open)
        let again = try pool.lease(among: [.cuda(0)]).get()
        #expect(platform.opens(of: .cuda(0)) == 1)
        #expect(again.device == .cuda(0) && again.summary == "NVDEC on cuda:0 (Pretend CUDA 0)")
    }

    @Test func severalCUDAContextsPerDeviceAreTakenInTurn() throws {
        let platform = PretendPlatform(cuda: [0])
        let pool = HardwareDevicePool(platform: platform, cudaContextsPerDevice: 3, clock: SystemClock())
        let leases = try (0..<7).map { _ in try pool.lease(among: [.cuda(0)]).get() }
        #expect(platform.opens(of: .cuda(0)) == 3, "three contexts, opened with the first decoder")
        #expect(pool.sessions(on: .cuda(0)) == 7)
        let contexts = leases.map { ObjectIdentifier($0.opened.context) }
        #expect(Set(contexts).count == 3)
        #expect(contexts[0] == contexts[3] && contexts[3] == contexts[6] && contexts[1] == contexts[4])
        #expect(contexts[0] != contexts[1] && contexts[1] != contexts[2])
    }

    @Test func newDecodersGoToTheLeastLoadedDevice() throws {
        let pool = HardwareDevicePool(platform: PretendPlatform(cuda: [0, 1]), clock: SystemClock())
        let devices: [HardwareDeviceID] = [.cuda(0), .cuda(1)]
        var leases = try (0..<3).map { _ in try pool.lease(among: devices).get() }
        #expect(leases.map(\.device) == [.cuda(0), .cuda(1), .cuda(0)])
        leases.remove(at: 1)  // the session on cuda:1 ends
        #expect(pool.usage().map(\.sessions) == [2, 0])
        leases.append(try pool.lease(among: devices).get())
        #expect(leases.last?.device == .cuda(1))
    }

    @Test func aFailedDeviceIsSkippedUntilItsBackOffEnds() throws {
        let clock = ManualClock()
        let platform = PretendPlatform(cuda: [0, 1], failing: [.cuda(0): "CUDA_ERROR_OUT_OF_MEMORY (2)"])
        let pool = HardwareDevicePool(
            platform: platform, retryDelay: .seconds(30), maxRetryDelay: .seconds(600), clock: clock)
        let devices: [HardwareDeviceID] = [.cuda(0), .cuda(1)]
        var leases: [HardwareDeviceLease] = []

        leases.append(try pool.lease(among: devices).get())
        #expect(leases.last?.device == .cuda(1))
        #expect(platform.opens(of: .cuda(0)) == 1)
        let failed = try #require(pool.usage().first { $0.device == .cuda(0) })
        #expect(failed.state == .failed && failed.error == "cuda:0: CUDA_ERROR_OUT_OF_MEMORY (2)")
        #expect(failed.retryInSeconds == 30)

        clock.advance(by: .seconds(29))
        leases.append(try pool.lease(among: devices).get())
        #expect(platform.opens(of: .cuda(0)) == 1, "not retried within its back-off")

        clock.advance(by: .seconds(2))
        leases.append(try pool.lease(among: devices).get())
        #expect(platform.opens(of: .cuda(0)) == 2, "retried once the back-off ended")
        #expect(leases.map(\.device) == [.cuda(1), .cuda(1), .cuda(1)])

        // The second failure doubles the back-off.
        clock.advance(by: .seconds(59))
        _ = try pool.lease(among: devices).get()
        #expect(platform.opens(of: .cuda(0)) == 2)
        platform.heal(.cuda(0))
        clock.advance(by: .seconds(2))
        let healed = try pool.lease(among: devices).get()
        #expect(healed.device == .cuda(0) && platform.opens(of: .cuda(0)) == 3)
        #expect(pool.usage().first { $0.device == .cuda(0) }?.state == .open)
    }

    @Test func noDeviceOpensSaysWhyForEach() {
        let clock = ManualClock()
        let pool = HardwareDevicePool(
            platform: PretendPlatform(cuda: [0, 1], failing: [.cuda(0): "broken", .cuda(1): "gone"]), clock: clock)
        _ = pool.lease(among: [.cuda(0), .cuda(1)])
        let result = pool.lease(among: [.cuda(0), .cuda(1)])
        guard case .failure(let error) = result else {
            Issue.record("expected a failure, got \(result)")
            return
        }
        #expect(error.code == .decoderUnavailable)
        #expect(error.message.contains("cuda:0: broken (next try in 30 s)"))
        #expect(error.message.contains("cuda:1: gone (next try in 30 s)"))
    }

    /// Every device asked about, in first-seen order: open, failed (and why) or not opened yet.
    @Test func usageListsEveryDeviceAskedAbout() throws {
        let pool = HardwareDevicePool(platform: PretendPlatform(cuda: [0], failing: [.cuda(1): "no"]), clock: SystemClock())
        let lease = try pool.lease(among: [.cuda(0)]).get()
        _ = pool.lease(among: [.cuda(1)])
        _ = pool.devices(.vaapi, in: HardwareDeviceList([.device(.renderNode("/dev/dri/renderD128"))]))
        let usage = pool.usage()
        #expect(usage.map(\.device) == [.cuda(0), .cuda(1), .renderNode("/dev/dri/renderD128")])
        #expect(usage[0].state == .open && usage[0].sessions == 1 && usage[0].error == nil)
        #expect(usage[1].state == .failed && usage[1].error == "cuda:1: no")
        #expect(usage[2].state == .notOpened && usage[2].kind == .vaapi)
        withExtendedLifetime(lease) {}
    }
}

/// `auto` tries CUDA, then VA-API, then software; a required back end tries only its kind.
@Suite(.timeLimit(.minutes(10))) struct BackendSelectionOrderTests {
    static let node = "/dev/dri/renderD128"

    @Test func autoPrefersCUDA() throws {
        let platform = PretendPlatform(cuda: [0], renderNodes: [Self.node])
        let plan = try BackendSelection.plan(options: .pretend(.auto, platform))
        #expect(plan.backend == .cuda && plan.lease?.device == .cuda(0) && !plan.required)
        #expect(plan.reason == "NVDEC on cuda:0 (Pretend CUDA 0)")
        #expect(plan.fallbacks.isEmpty)
        #expect(platform.opens(of: .renderNode(Self.node)) == 0)
    }

    @Test func autoTakesVAAPIWhenCUDADoesNotOpen() throws {
        let platform = PretendPlatform(cuda: [0], renderNodes: [Self.node], failing: [.cuda(0): "no context"])
        let plan = try BackendSelection.plan(options: .pretend(.auto, platform))
        #expect(plan.backend == .vaapi && plan.lease?.device == .renderNode(Self.node))
        #expect(plan.reason == "VA-API on /dev/dri/renderD128 (Pretend VA-API /dev/dri/renderD128)")
        #expect(plan.fallbacks.map(\.reason) == [.deviceUnavailable])
        #expect(plan.fallbacks.first?.from == .cuda && plan.fallbacks.first?.to == .vaapi)
    }

    @Test func autoWithoutAnyDeviceIsSoftwareAndNamesWhatItTried() throws {
        let plan = try BackendSelection.plan(options: .pretend(.auto, NoHardware()))
        #expect(plan.backend == .software && plan.lease == nil)
        #expect(plan.reason.hasPrefix("software: CUDA unavailable: no device (no NVIDIA driver in this test)"))
        #expect(plan.reason.contains("VA-API unavailable: no /dev/dri/renderD* render node found"))
        // Nothing existed to try: not a fallback.
        #expect(plan.fallbacks.isEmpty)
    }

    @Test func autoWhenEveryDeviceFailsRecordsEachFallback() throws {
        let platform = PretendPlatform(
            cuda: [0], renderNodes: [Self.node], failing: [.cuda(0): "busy", .renderNode(Self.node): "no driver"])
        let plan = try BackendSelection.plan(options: .pretend(.auto, platform))
        #expect(plan.backend == .software)
        #expect(plan.fallbacks.map { "\($0.from.rawValue)->\($0.to.rawValue)" } == ["cuda->vaapi", "vaapi->software"])
        #expect(plan.reason.contains("cuda:0: busy") && plan.reason.contains("\(Self.node): no driver"))
    }

    @Test func requiredCUDAWithoutADeviceIsACleanError() {
        let platform = PretendPlatform(renderNodes: [Self.node])
        #expect {
            _ = try BackendSelection.plan(options: .pretend(.cuda, platform))
        } throws: { error in
            (error as? DecodeError)?.code == .decoderUnavailable
                && (error as? DecodeError)?.message == "CUDA unavailable: no device (the pretend driver reports no device)"
        }
        #expect(platform.opens(of: .renderNode(Self.node)) == 0, "a required back end never tries another kind")
        #expect {
            _ = try StreamDecoder(options: .pretend(.cuda, NoHardware()), factory: PretendHardwareFactory())
        } throws: { error in
            (error as? DecodeError)?.code == .decoderUnavailable
        }
    }

    @Test func requiredVAAPISkipsCUDA() throws {
        let platform = PretendPlatform(cuda: [0], renderNodes: [Self.node])
        let plan = try BackendSelection.plan(options: .pretend(.vaapi, platform))
        #expect(plan.backend == .vaapi && plan.required)
        #expect(platform.opens(of: .cuda(0)) == 0)
    }

    @Test func softwareOpensNothing() throws {
        let platform = PretendPlatform(cuda: [0], renderNodes: [Self.node])
        let plan = try BackendSelection.plan(options: .pretend(.software, platform))
        #expect(plan.backend == .software && plan.reason == "software decoding requested")
        #expect(platform.opens(of: .cuda(0)) == 0 && platform.opens(of: .renderNode(Self.node)) == 0)
    }

    @Test func theDeviceListDecidesWhichDevicesAreTried() throws {
        let platform = PretendPlatform(cuda: [0, 1], renderNodes: [Self.node])
        let second = try BackendSelection.plan(
            options: .pretend(.auto, platform, devices: try HardwareDeviceList(parsing: "cuda:1")))
        #expect(second.lease?.device == .cuda(1))
        let nodesOnly = try BackendSelection.plan(
            options: .pretend(.auto, platform, devices: try HardwareDeviceList(parsing: "vaapi")))
        #expect(nodesOnly.backend == .vaapi && platform.opens(of: .cuda(0)) == 0)
        let none = try BackendSelection.plan(
            options: .pretend(.auto, PretendPlatform(cuda: [0]), devices: try HardwareDeviceList(parsing: "vaapi")))
        #expect(none.backend == .software && none.reason.contains("no CUDA device in the device list vaapi"))
    }

    /// Through `StreamDecoder`: the decoder holds its device while it lives.
    @Test func aStreamDecoderHoldsItsDeviceWhileItLives() throws {
        let pool = HardwareDevicePool(platform: PretendPlatform(cuda: [0]), clock: SystemClock())
        var decoder: StreamDecoder? = try StreamDecoder(
            options: .pretend(.auto, NoHardware(), pool: pool), factory: PretendHardwareFactory())
        #expect(decoder?.backend == .cuda && decoder?.device == .cuda(0))
        #expect(pool.sessions(on: .cuda(0)) == 1)
        decoder = nil
        #expect(pool.sessions(on: .cuda(0)) == 0)
    }

    /// The real `LibavDecoder` on a device without a usable context (a pretend one): with `auto`
    /// the supervisor falls back to software and gives the device back; a required back end throws.
    @Test func aHardwareDecoderThatCannotStartFallsBackOrFails() throws {
        let pool = HardwareDevicePool(platform: PretendPlatform(cuda: [0]), clock: SystemClock())
        let backends = try BackendSupervisor(
            codec: .h264, options: .pretend(.auto, NoHardware(), pool: pool), factory: LibavDecoderFactory())
        #expect(backends.backend == .software && backends.device == nil)
        #expect(backends.fallbacks.map(\.reason) == [.hwaccelInitFailed])
        #expect(backends.backendReason.hasPrefix("software: CUDA unavailable: the NVDEC on cuda:0 (Pretend CUDA 0) decoder did not open"))
        #expect(pool.sessions(on: .cuda(0)) == 0)
        #expect {
            _ = try BackendSupervisor(
                codec: .h264, options: .pretend(.cuda, NoHardware(), pool: pool), factory: LibavDecoderFactory())
        } throws: { error in
            (error as? DecodeError)?.code == .decoderUnavailable
        }
        #expect(pool.sessions(on: .cuda(0)) == 0)
    }
}
