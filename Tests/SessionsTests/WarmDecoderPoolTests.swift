import Decoding
import HardwareTestSupport
import Sessions
import Testing
import TestSupport
import Timekeeping
import VideoCoding

/// The warm decoders catch-ups borrow, through pretend NVDEC (a real software decoder inside
/// that holds one picture back, as a hardware pipeline does): no GPU needed.
@Suite(.timeLimit(.minutes(10))) struct WarmDecoderPoolTests {
    static let stream = "high_320x240.264"

    /// The one session these catch-ups are of, unless a test says otherwise.
    static let owner = WarmDecoderPool.Owner.make()

    static func pool(_ clock: ManualClock, perDevice: Int = 2, total: Int = 4) -> WarmDecoderPool {
        WarmDecoderPool(limits: .init(perDevice: perDevice, total: total, idleTimeout: .seconds(30)), clock: clock)
    }

    /// A catch-up's decoder: a stream decoder on the pool's lender for `format`.
    static func catchUp(
        _ pool: WarmDecoderPool, _ factory: PretendHardwareFactory, format: StreamFormat? = nil,
        devices: HardwareDeviceList? = nil, owner: WarmDecoderPool.Owner = Self.owner
    ) throws -> StreamDecoder {
        try StreamDecoder(
            options: .pretend(.cuda, PretendPlatform(cuda: [0, 1]), devices: devices),
            factory: pool.lender(making: factory, for: format, owner: owner))
    }

    /// Every picture of `bytes`, the stream ended.
    static func decodeAll(_ bytes: [UInt8], _ decoder: StreamDecoder) -> DecodeOutput {
        var output = decoder.push(bytes)
        let end = decoder.finish()
        output.frames += end.frames
        output.errors += end.errors
        return output
    }

    static func md5(_ frames: [DecodedFrame]) -> String { MD5.hex(frames) { $0.appendPackedPlanes(to: &$1) } }

    /// The stream's pictures decoded by a plain software decoder.
    static func reference(_ file: String) throws -> String {
        md5(decodeAll(try Fixtures.bytes(file), try StreamDecoder()).frames)
    }

    /// The stream's format, as its SPS says.
    static func format(of file: String) throws -> StreamFormat {
        let decoder = try StreamDecoder()
        _ = decoder.push(try Fixtures.bytes(file))
        return try #require(decoder.format)
    }

    @Test func aSecondCatchUpOfTheSameShapeReusesTheDecoder() throws {
        let clock = ManualClock()
        let pool = Self.pool(clock)
        let factory = PretendHardwareFactory()
        let format = try Self.format(of: Self.stream)
        let bytes = try Fixtures.bytes(Self.stream)
        do {
            let first = try Self.catchUp(pool, factory, format: format)
            #expect(try Self.reference(Self.stream) == Self.md5(Self.decodeAll(bytes, first).frames))
        }
        #expect(pool.usage.idle == 1, "the decoder went back when its catch-up let it go")
        let second = try Self.catchUp(pool, factory, format: format)
        let output = Self.decodeAll(bytes, second)
        #expect(output.errors.isEmpty)
        #expect(try Self.reference(Self.stream) == Self.md5(output.frames))
        #expect(factory.hardwareDecodersMade.value == 1)
        #expect(pool.usage.hits == 1 && pool.usage.misses == 1 && pool.usage.idle == 0)
    }

    @Test func anotherShapeOrDeviceOpensItsOwn() throws {
        let clock = ManualClock()
        let pool = Self.pool(clock)
        let factory = PretendHardwareFactory()
        let small = try Self.format(of: "baseline_176x144.264")
        let large = try Self.format(of: Self.stream)
        do { _ = Self.decodeAll(try Fixtures.bytes("baseline_176x144.264"), try Self.catchUp(pool, factory, format: small)) }
        do { _ = Self.decodeAll(try Fixtures.bytes(Self.stream), try Self.catchUp(pool, factory, format: large)) }
        do {
            let onOne = try Self.catchUp(pool, factory, format: large, devices: HardwareDeviceList(parsing: "cuda:1"))
            _ = Self.decodeAll(try Fixtures.bytes(Self.stream), onOne)
        }
        #expect(factory.hardwareDecodersMade.value == 3)
        #expect(pool.usage.misses == 3 && pool.usage.hits == 0 && pool.usage.idle == 3)
    }

    /// A warm decoder keeps its frame pool's buffers, and H.265 leaves what a damaged picture
    /// does not cover as the buffer held it: lent to another session, it would show that
    /// session's pixels. Another session opens its own, and its damaged picture is the same as
    /// a fresh decoder's.
    @Test func anotherSessionNeverGetsASessionsWarmDecoder() throws {
        let pool = Self.pool(ManualClock())
        let whole = try Fixtures.bytes("slices4_320x240.265")
        // The first picture without its slices after the first: three quarters of it are
        // never decoded.
        var damaged: [UInt8] = []
        var firstPictureSlices = 0
        var dropped = 0
        for unit in AnnexBSplitter.split(whole) {
            let bytes = Array(unit.bytes)
            let type = bytes[0] >> 1 & 0x3F
            let firstInPicture = bytes.count > 2 && bytes[2] & 0x80 != 0
            if type <= 21, firstInPicture { firstPictureSlices += 1 }
            if type <= 21, !firstInPicture, firstPictureSlices == 1 {
                dropped += 1
                continue
            }
            damaged += [0, 0, 0, 1] + bytes
        }
        #expect(dropped == 3)
        let options = DecoderOptions.lowLatency(backend: .software)
        let owners = ["other": WarmDecoderPool.Owner.make(), "mine": WarmDecoderPool.Owner.make()]
        func decode(_ bytes: [UInt8], session: String) throws -> [DecodedFrame] {
            let decoder = try StreamDecoder(
                options: options, factory: pool.lender(making: LibavDecoderFactory(), for: nil, owner: owners[session]!))
            return Self.decodeAll(bytes, decoder).frames
        }
        let fresh = Self.md5(Self.decodeAll(damaged, try StreamDecoder(options: options)).frames)
        _ = try decode(whole, session: "other")
        #expect(pool.usage.idle == 1)
        #expect(Self.md5(try decode(damaged, session: "mine")) == fresh, "another session's pixels in the damaged picture")
        #expect(pool.usage.hits == 0 && pool.usage.misses == 2)
        _ = try decode(damaged, session: "mine")
        #expect(pool.usage.hits == 1, "the session's own warm decoder is lent to it again")
        // A session that ends takes its warm decoders with it.
        pool.discard(owner: owners["mine"]!)
        #expect(pool.usage.idle == 1, "only the other session's is left")
    }

    /// A catch-up that stops mid-stream leaves pictures inside its decoder; the next one to
    /// borrow it must see only its own.
    @Test func noPictureOfOneCatchUpReachesTheNext() throws {
        let clock = ManualClock()
        let pool = Self.pool(clock)
        let factory = PretendHardwareFactory()
        let bytes = try Fixtures.bytes(Self.stream)
        var firstPictures = 0
        do {
            let first = try Self.catchUp(pool, factory)
            firstPictures = first.push(Array(bytes.prefix(bytes.count / 2))).frames.count
        }
        #expect(factory.hardwareFrames.value > firstPictures, "pictures were left inside the decoder")
        let second = try Self.catchUp(pool, factory)
        let output = Self.decodeAll(bytes, second)
        #expect(pool.usage.hits == 1)
        #expect(try Self.reference(Self.stream) == Self.md5(output.frames))
    }

    @Test func anIdleDecoderIsClosedAfterTheTimeout() throws {
        let clock = ManualClock()
        let pool = Self.pool(clock)
        let factory = PretendHardwareFactory()
        do { _ = Self.decodeAll(try Fixtures.bytes(Self.stream), try Self.catchUp(pool, factory)) }
        clock.advance(by: .seconds(29))
        #expect(pool.usage.idle == 1)
        clock.advance(by: .seconds(1))
        #expect(pool.usage.idle == 0 && pool.usage.expired == 1)
        do { _ = Self.decodeAll(try Fixtures.bytes(Self.stream), try Self.catchUp(pool, factory)) }
        #expect(factory.hardwareDecodersMade.value == 2 && pool.usage.hits == 0)
    }

    @Test func theBoundsPerDeviceAndInAllHold() throws {
        let clock = ManualClock()
        let factory = PretendHardwareFactory()
        let bytes = try Fixtures.bytes(Self.stream)
        let perDevice = Self.pool(clock, perDevice: 2, total: 10)
        do {
            let three = try (0..<3).map { _ in try Self.catchUp(perDevice, factory) }
            for decoder in three { _ = Self.decodeAll(bytes, decoder) }
        }
        #expect(perDevice.usage.idle == 2 && perDevice.usage.evicted == 1)

        let inAll = Self.pool(clock, perDevice: 2, total: 3)
        do {
            let zero = try (0..<2).map { _ in try Self.catchUp(inAll, factory, devices: HardwareDeviceList(parsing: "cuda:0")) }
            let one = try (0..<2).map { _ in try Self.catchUp(inAll, factory, devices: HardwareDeviceList(parsing: "cuda:1")) }
            for decoder in zero + one { _ = Self.decodeAll(bytes, decoder) }
        }
        #expect(inAll.usage.idle == 3 && inAll.usage.evicted == 1)
    }

    /// A catch-up decoder probes H.264's reorder delay as the ffmpeg CLI does; a warm one keeps
    /// its context through that probe, and its pictures are still exactly a fresh decoder's.
    @Test(arguments: ["main_bframes_176x144.264", "high_320x240.264", "res_change_176x144_320x240.264"])
    func aWarmDecoderThatProbesReorderingDecodesExactly(_ file: String) throws {
        let pool = Self.pool(ManualClock())
        var options = DecoderOptions.lowLatency(backend: .software)
        options.emulateFFmpegProbe = true
        options.probeOnlyUnannouncedReordering = true
        let bytes = try Fixtures.bytes(file)
        let fresh = Self.md5(Self.decodeAll(bytes, try StreamDecoder(options: options)).frames)
        for _ in 0..<3 {
            let decoder = try StreamDecoder(options: options, factory: pool.lender(making: LibavDecoderFactory(), for: nil, owner: Self.owner))
            #expect(Self.md5(Self.decodeAll(bytes, decoder).frames) == fresh)
        }
        #expect(pool.usage.hits == 2)
    }

    /// A decoder that turned its stream down would only turn the next one of that shape down.
    @Test func aRefusingDecoderIsNotKept() throws {
        let clock = ManualClock()
        let pool = Self.pool(clock)
        let refusal = HardwareCapability.Refusal(reason: .noHardwareFormat, message: "no CUDA format")
        let factory = PretendHardwareFactory(refusal: refusal)
        let decoder = try StreamDecoder(
            options: .pretend(.auto, PretendPlatform(cuda: [0])), factory: pool.lender(making: factory, for: nil, owner: Self.owner))
        #expect(try Self.reference(Self.stream) == Self.md5(Self.decodeAll(try Fixtures.bytes(Self.stream), decoder).frames))
        #expect(decoder.backend == .software)
        #expect(pool.usage.idle == 0, "the refusing hardware decoder was closed")
    }
}

/// Pictures from the past through a session: after the first, each borrows the warm decoder the
/// one before gave back, and each is still exactly the live decode's picture.
@Suite(.timeLimit(.minutes(10))) struct WarmPastPictureTests {
    @Test func picturesFromThePastReuseOneWarmDecoder() async throws {
        let stream = try Fixture.bytes("main_bframes_176x144.264")
        let live = try await OnDemand.livePictures(stream)
        let configuration = OnDemand.configuration()
        let services = SessionServices.forTests(configuration, clock: SystemClock())
        let session = try makeSession(configuration: configuration, services: services)
        defer { session.close() }
        _ = try await push(stream, to: session, flush: true)
        let numbers = live.keys.sorted()
        for number in numbers {
            let served = try await OnDemand.pastPicture(session, .number(number)).get().served
            #expect(served.map { Array($0.picture.bytes) } == live[number], "#\(number)")
        }
        let usage = services.catchUpPool.warmDecoders.usage
        #expect(usage.misses == 1 && usage.hits == numbers.count - 1, "\(usage)")
        #expect(usage.idle == 1)
    }
}
