import CFFmpeg
@testable import Decoding
@testable import Imaging
import Testing
import TestSupport

/// The GPU's JPEG input, checked without a GPU: `JPEGInputKernels`' PTX, run by `PTXInterpreter`
/// with the very launches `NvJPEGBackend` makes, writes the bytes the CPU encoder compresses
/// (`RangeExpansion` for BT.601, `JPEGColor` for other matrices), for real pictures and for noise
/// that reaches every clamp, at odd sizes and with pitches wider than the rows. The NV12 source
/// and the planar output are lent with no byte to spare after their last row, so a kernel that
/// reads or writes past a plane fails here.
@Suite(.timeLimit(.minutes(10))) struct JPEGInputKernelTests {
    /// A 4:2:0 picture as three tight planes, the way the CPU reads it.
    struct Planar {
        let width: Int
        let height: Int
        var y: [UInt8]
        var u: [UInt8]
        var v: [UInt8]
        var chromaWidth: Int { (width + 1) / 2 }
        var chromaHeight: Int { (height + 1) / 2 }
    }

    static func picture(_ file: String, width: Int? = nil, height: Int? = nil) throws -> (Planar, DecodedFrame) {
        let frame = try #require(try DeviceJPEGEncoderTests.softwareFrames(file).dropFirst().first)
        let system = try frame.systemFrame()
        let width = width ?? frame.width
        let height = height ?? frame.height
        func plane(_ index: Int, _ columns: Int, _ rows: Int) -> [UInt8] {
            let stride = Int(withUnsafeBytes(of: system.pointee.linesize) { $0.load(fromByteOffset: index * 4, as: Int32.self) })
            let base = withUnsafeBytes(of: system.pointee.data) { $0.load(fromByteOffset: index * 8, as: UnsafePointer<UInt8>.self) }
            return (0..<rows).flatMap { row in (0..<columns).map { base[row * stride + $0] } }
        }
        let chroma = ((width + 1) / 2, (height + 1) / 2)
        let planar = Planar(
            width: width, height: height, y: plane(0, width, height), u: plane(1, chroma.0, chroma.1),
            v: plane(2, chroma.0, chroma.1))
        return (planar, frame)
    }

    static func noise(width: Int, height: Int) -> Planar {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt8 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 56)
        }
        let chroma = ((width + 1) / 2) * ((height + 1) / 2)
        var picture = Planar(
            width: width, height: height, y: (0..<width * height).map { _ in next() }, u: (0..<chroma).map { _ in next() },
            v: (0..<chroma).map { _ in next() })
        // Every extreme: the corners of the chroma square with black and white luma beside them.
        for (index, (cb, cr)) in [(0, 0), (255, 255), (0, 255), (255, 0)].enumerated() where index < chroma {
            picture.u[index] = UInt8(cb)
            picture.v[index] = UInt8(cr)
            picture.y[2 * index] = index % 2 == 0 ? 0 : 255
        }
        return picture
    }

    /// What the CPU encoder compresses for `picture`.
    static func onTheCPU(_ picture: Planar, _ mapping: DeviceSampleMapping) throws -> Planar {
        var output = picture
        switch mapping {
        case .range(.full):
            break
        case .range:
            for (chroma, keyPath, width, rows) in [
                (false, \Planar.y, picture.width, picture.height), (true, \Planar.u, picture.chromaWidth, picture.chromaHeight),
                (true, \Planar.v, picture.chromaWidth, picture.chromaHeight),
            ] {
                let source = picture[keyPath: keyPath]
                source.withUnsafeBufferPointer { source in
                    output[keyPath: keyPath].withUnsafeMutableBufferPointer { result in
                        RangeExpansion.apply(
                            chroma: chroma, from: source.baseAddress!, sourceStride: width, to: result.baseAddress!,
                            outputStride: width, rowBytes: width, rows: rows)
                    }
                }
            }
        case .matrix(let color):
            let layout = try #require(PlaneLayout(pixelFormat: AV_PIX_FMT_YUV420P, width: picture.width, height: picture.height))
            picture.y.withUnsafeBufferPointer { y in
                picture.u.withUnsafeBufferPointer { u in
                    picture.v.withUnsafeBufferPointer { v in
                        output.y.withUnsafeMutableBufferPointer { outY in
                            output.u.withUnsafeMutableBufferPointer { outU in
                                output.v.withUnsafeMutableBufferPointer { outV in
                                    let strides = [Int32(picture.width), Int32(picture.chromaWidth), Int32(picture.chromaWidth), 0]
                                    let input = PlanePointers(data: [y.baseAddress, u.baseAddress, v.baseAddress, nil], strides: strides)
                                    let result = PlanePointers(
                                        data: [UnsafePointer(outY.baseAddress), UnsafePointer(outU.baseAddress),
                                               UnsafePointer(outV.baseAddress), nil],
                                        strides: strides)
                                    color.apply(input, to: result, layout: layout)
                                }
                            }
                        }
                    }
                }
            }
        }
        return output
    }

    /// What the kernels write for `picture`, given to them as NV12 with rows `lumaPad` and
    /// `chromaPad` bytes wider than the samples, into a planar picture `outputPad` wider.
    static func onTheDevice(
        _ picture: Planar, _ mapping: DeviceSampleMapping, lumaPad: Int = 40, chromaPad: Int = 24, outputPad: Int = 13
    ) throws -> Planar {
        let interpreter = try PTXInterpreter(ptx: JPEGInputKernels.ptx)
        let memory = PTXInterpreter.Memory()
        let lumaPitch = picture.width + lumaPad
        let chromaPitch = 2 * picture.chromaWidth + chromaPad
        var luma = [UInt8](repeating: 0xA5, count: lumaPitch * (picture.height - 1) + picture.width)
        var chroma = [UInt8](repeating: 0x5A, count: chromaPitch * (picture.chromaHeight - 1) + 2 * picture.chromaWidth)
        for row in 0..<picture.height {
            for column in 0..<picture.width { luma[row * lumaPitch + column] = picture.y[row * picture.width + column] }
        }
        for row in 0..<picture.chromaHeight {
            for column in 0..<picture.chromaWidth {
                chroma[row * chromaPitch + 2 * column] = picture.u[row * picture.chromaWidth + column]
                chroma[row * chromaPitch + 2 * column + 1] = picture.v[row * picture.chromaWidth + column]
            }
        }
        let outputPitch = picture.width + outputPad
        let outputRows = picture.height + 2 * picture.chromaHeight
        let output = memory.lend([UInt8](repeating: 0xEE, count: outputPitch * (outputRows - 1) + picture.chromaWidth))
        let source = JPEGInputKernels.NV12Picture(
            luma: memory.lend(luma), lumaPitch: lumaPitch, chroma: memory.lend(chroma), chromaPitch: chromaPitch,
            width: picture.width, height: picture.height)
        let planar = JPEGInputKernels.PlanarPicture(base: output, pitch: outputPitch)
        let tables = memory.lend(JPEGInputKernels.tables)
        for launch in JPEGInputKernels.launches(from: source, to: planar, mapping: mapping, tables: tables) {
            let grid = (
                x: (launch.columns + JPEGInputKernels.blockWidth - 1) / JPEGInputKernels.blockWidth,
                y: (launch.rows + JPEGInputKernels.blockHeight - 1) / JPEGInputKernels.blockHeight
            )
            try interpreter.launch(
                launch.function, grid: grid, block: (JPEGInputKernels.blockWidth, JPEGInputKernels.blockHeight),
                arguments: launch.arguments, memory: memory)
        }
        let written = memory.bytes(at: output)
        let (_, u, v) = planar.planes(height: picture.height)
        // Nothing written outside the three planes' visible samples: not in a row's padding,
        // not between the planes.
        let visible: [(start: Int, columns: Int, rows: Int)] = [
            (0, picture.width, picture.height), (Int(u - output), picture.chromaWidth, picture.chromaHeight),
            (Int(v - output), picture.chromaWidth, picture.chromaHeight),
        ]
        let stray = written.indices.filter { index in
            written[index] != 0xEE
                && !visible.contains { plane in
                    index >= plane.start && (index - plane.start) / outputPitch < plane.rows
                        && (index - plane.start) % outputPitch < plane.columns
                }
        }
        #expect(stray.isEmpty, "the kernels wrote \(stray.count) bytes outside the planes, the first at \(stray.first ?? 0)")
        func plane(from start: UInt64, _ columns: Int, _ rows: Int) -> [UInt8] {
            let offset = Int(start - output)
            return (0..<rows).flatMap { row in written[(offset + row * outputPitch)..<(offset + row * outputPitch + columns)] }
        }
        return Planar(
            width: picture.width, height: picture.height, y: plane(from: output, picture.width, picture.height),
            u: plane(from: u, picture.chromaWidth, picture.chromaHeight),
            v: plane(from: v, picture.chromaWidth, picture.chromaHeight))
    }

    static func differences(_ device: Planar, _ cpu: Planar) -> String {
        let planes = [("Y", device.y, cpu.y), ("Cb", device.u, cpu.u), ("Cr", device.v, cpu.v)]
        return planes.compactMap { name, device, cpu in
            let wrong = zip(device, cpu).enumerated().filter { $0.element.0 != $0.element.1 }
            guard let first = wrong.first else { return nil }
            return "\(name): \(wrong.count) samples differ, the first at \(first.offset): \(first.element.0) against \(first.element.1)"
        }.joined(separator: "; ")
    }

    // MARK: BT.601: the tables

    @Test(arguments: [ColorRange.limited, .full])
    func bt601PicturesGetTheCPUsBytes(range: ColorRange) throws {
        let (picture, frame) = try Self.picture("high_320x240.264", width: 77, height: 45)
        #expect(frame.colorRange == .limited && DeviceSampleMapping(frame) == .range(.limited))
        for input in [picture, Self.noise(width: 63, height: 31)] {
            let device = try Self.onTheDevice(input, .range(range))
            let wrong = Self.differences(device, try Self.onTheCPU(input, .range(range)))
            #expect(wrong.isEmpty, "\(wrong)")
        }
    }

    // MARK: Other matrices: JPEGColor's arithmetic

    @Test func hdPicturesAreConvertedFromBT709LikeTheCPUDoes() throws {
        // A 720-line picture that states no matrix is read as BT.709, as libavcodec's and
        // browsers' own conversions do.
        let color = try #require(JPEGColor(matrix: .unspecified, height: 720, fullRange: false))
        #expect(JPEGColor(matrix: .unspecified, height: 719, fullRange: false) == nil)
        let (picture, _) = try Self.picture("high_320x240.264", width: 75, height: 43)
        for input in [picture, Self.noise(width: 65, height: 33)] {
            let device = try Self.onTheDevice(input, .matrix(color))
            let wrong = Self.differences(device, try Self.onTheCPU(input, .matrix(color)))
            #expect(wrong.isEmpty, "\(wrong)")
            #expect(!Self.differences(device, input).isEmpty, "the conversion changed nothing")
        }
    }

    @Test func aFullRangeBT709StreamIsConvertedWithItsOwnRange() throws {
        let (picture, frame) = try Self.picture("fullrange_bt709_176x144.265")
        #expect(frame.colorRange == .full && frame.colorMatrix == .bt709)
        let mapping = DeviceSampleMapping(frame)
        guard case .matrix(let color) = mapping else {
            Issue.record("a BT.709 picture maps as \(mapping)")
            return
        }
        #expect(color.lumaOffset == 0)
        let device = try Self.onTheDevice(picture, mapping, lumaPad: 80, chromaPad: 0, outputPad: 0)
        let wrong = Self.differences(device, try Self.onTheCPU(picture, mapping))
        #expect(wrong.isEmpty, "\(wrong)")
    }

    @Test(arguments: [ColorMatrix.bt2020, .smpte240m, .fcc])
    func everyOtherMatrixToo(matrix: ColorMatrix) throws {
        let color = try #require(JPEGColor(matrix: matrix, height: 480, fullRange: false))
        let input = Self.noise(width: 33, height: 17)
        let wrong = Self.differences(try Self.onTheDevice(input, .matrix(color)), try Self.onTheCPU(input, .matrix(color)))
        #expect(wrong.isEmpty, "\(wrong)")
    }

    // MARK: The launches

    @Test func everyKernelTheBackendLaunchesIsInThePTX() throws {
        let interpreter = try PTXInterpreter(ptx: JPEGInputKernels.ptx)
        #expect(interpreter.kernelNames == Set(JPEGInputKernels.functions))
        let source = JPEGInputKernels.NV12Picture(luma: 0, lumaPitch: 64, chroma: 0, chromaPitch: 64, width: 7, height: 5)
        let output = JPEGInputKernels.PlanarPicture(base: 1 << 20, pitch: 32)
        let color = try #require(JPEGColor(matrix: .bt709, height: 5, fullRange: false))
        for mapping in [DeviceSampleMapping.range(.limited), .matrix(color)] {
            let launches = JPEGInputKernels.launches(from: source, to: output, mapping: mapping, tables: 0)
            #expect(launches.map { [$0.columns, $0.rows] } == [[7, 5], [4, 3]])
        }
        // A negative coefficient travels as its two's complement and is read back from its low 32 bits.
        let matrix = JPEGInputKernels.launches(from: source, to: output, mapping: .matrix(color), tables: 0)
        #expect(color.coefficients.contains { $0 < 0 })
        #expect(Array(matrix[0].arguments[6...8]).map { Int32(truncatingIfNeeded: $0) } == Array(color.coefficients[0...2]))
    }

    @Test func theInterpreterRefusesWhatItDoesNotKnowAndAccessesOutsideTheBuffers() throws {
        let unknown = """
            .visible .entry k(
                .param .u64 p_a
            )
            {
                tex.2d.v4.f32.f32 %f1, [%rd1];
                ret;
            }
            """
        let interpreter = try PTXInterpreter(ptx: unknown)
        #expect(throws: PTXInterpreter.Failure.self) {
            try interpreter.launch("k", grid: (1, 1), block: (1, 1), arguments: [0], memory: PTXInterpreter.Memory())
        }
        let memory = PTXInterpreter.Memory()
        let base = memory.lend([1, 2, 3])
        let table = memory.lend(JPEGInputKernels.tables)
        let kernels = try PTXInterpreter(ptx: JPEGInputKernels.ptx)
        // Rows of 3 with a pitch of 3 over 2 rows read 3 bytes past the 3 lent.
        #expect(throws: PTXInterpreter.Failure.self) {
            try kernels.launch(
                JPEGInputKernels.mapPlane, grid: (1, 1), block: (32, 8), arguments: [base, 3, base, 3, table, 3, 2],
                memory: memory)
        }
    }
}
