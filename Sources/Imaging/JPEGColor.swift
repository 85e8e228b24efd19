import CFFmpeg
import CTurboJPEG
import Decoding

/// A picture's YCbCr as JPEG's: JFIF is BT.601 at full range, and every decoder of a JPEG reads
/// it so, so a picture coded with another matrix (BT.709 for almost every HD camera, BT.2020 for
/// HDR ones) has its samples converted, with its range, in one pass (`ft_ycbcr_to_jpeg`). A
/// BT.601 picture needs its range changed alone, which `RangeExpansion` does faster; the matrix
/// chosen for each stream is the one `latest.rgb` uses (`TurboJPEGEncoder.swsColorspace`).
struct JPEGColor: Equatable {
    /// 16.16 fixed point: Y from (Y, Cb, Cr), Cb from (Cb, Cr), Cr from (Cb, Cr); see `ft_ycbcr_to_jpeg`.
    let coefficients: [Int32]
    /// 16 for limited-range luma, 0 for full range.
    let lumaOffset: Int32

    /// Nil where the samples are JPEG's matrix already (BT.601, or RGB and YCgCo, which
    /// swscale renders with BT.601 too) and only the range may need changing.
    init?(matrix: ColorMatrix, height: Int, fullRange: Bool) {
        guard let (kr, kb) = Self.weights(matrix, height: height) else { return nil }
        // Normalised components of the source: E_Y in 0...1, E_Cb and E_Cr in -0.5...0.5.
        let lumaScale = fullRange ? 1.0 / 255 : 1.0 / 219
        let chromaScale = fullRange ? 1.0 / 255 : 1.0 / 224
        // E' = B · A · E: A the source's YCbCr to RGB, B RGB to BT.601's YCbCr.
        let kg = 1 - kr - kb
        let toRGB: [[Double]] = [
            [1, 0, 2 * (1 - kr)],
            [1, -2 * (1 - kb) * kb / kg, -2 * (1 - kr) * kr / kg],
            [1, 2 * (1 - kb), 0],
        ]
        let (kr601, kb601) = (0.299, 0.114)
        let kg601 = 1 - kr601 - kb601
        let fromRGB: [[Double]] = [
            [kr601, kg601, kb601],
            [-kr601 / (2 * (1 - kb601)), -kg601 / (2 * (1 - kb601)), 0.5],
            [0.5, -kg601 / (2 * (1 - kr601)), -kb601 / (2 * (1 - kr601))],
        ]
        var combined = [[Double]](repeating: [0, 0, 0], count: 3)
        for row in 0..<3 {
            for column in 0..<3 {
                combined[row][column] = (0..<3).reduce(0) { $0 + fromRGB[row][$1] * toRGB[$1][column] }
            }
        }
        let inputScale = [lumaScale, chromaScale, chromaScale]
        func fixed(_ row: Int, _ column: Int) -> Int32 {
            Int32((255 * combined[row][column] * inputScale[column] * 65536).rounded())
        }
        coefficients = [fixed(0, 0), fixed(0, 1), fixed(0, 2), fixed(1, 1), fixed(1, 2), fixed(2, 1), fixed(2, 2)]
        lumaOffset = fullRange ? 0 : 16
    }

    /// Kr and Kb of the matrix the picture is read with; nil for BT.601's own.
    private static func weights(_ matrix: ColorMatrix, height: Int) -> (Double, Double)? {
        switch matrix.effective(height: height) {
        case .bt709: (0.2126, 0.0722)
        case .bt2020: (0.2627, 0.0593)
        case .fcc: (0.30, 0.11)
        case .smpte240m: (0.212, 0.087)
        case .bt601, .ycgco, .rgb, .unspecified: nil
        }
    }

    /// Converts the planes of `layout` (8-bit planar YCbCr, three planes: the caller never asks
    /// for a grey one) from `input` into `output`, which may be the same planes.
    func apply(_ input: PlanePointers, to output: PlanePointers, layout: PlaneLayout) {
        guard let descriptor = av_pix_fmt_desc_get(layout.pixelFormat) else { return }
        precondition(layout.planeCount == 3, "JPEGColor converts YCbCr, not \(layout.planeCount) planes")
        var inputs: [UnsafePointer<UInt8>?] = [input.data[0], input.data[1], input.data[2]]
        var outputs: [UnsafeMutablePointer<UInt8>?] = (0..<3).map { output.data[$0].map(UnsafeMutablePointer.init(mutating:)) }
        guard inputs.allSatisfy({ $0 != nil }), outputs.allSatisfy({ $0 != nil }) else { return }
        let inputStrides = (0..<3).map { Int(input.strides[$0]) }
        let outputStrides = (0..<3).map { Int(output.strides[$0]) }
        coefficients.withUnsafeBufferPointer { m in
            inputs.withUnsafeMutableBufferPointer { inputs in
                outputs.withUnsafeMutableBufferPointer { outputs in
                    ft_ycbcr_to_jpeg(
                        inputs.baseAddress, inputStrides, outputs.baseAddress, outputStrides, layout.rowBytes[0],
                        layout.rows[0], layout.rowBytes[1], layout.rows[1], Int32(descriptor.pointee.log2_chroma_w),
                        Int32(descriptor.pointee.log2_chroma_h), m.baseAddress, lumaOffset)
                }
            }
        }
    }
}
