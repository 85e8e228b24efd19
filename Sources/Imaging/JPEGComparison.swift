import CTurboJPEG
#if canImport(Glibc)
    import Glibc
#endif

/// How close two JPEGs of one picture are: both decoded by TurboJPEG to their YCbCr planes (no
/// colour conversion, so only the encoders' differences count) and compared sample by sample.
/// `frametap decode --compare-encoders` uses it to measure a GPU encoder against the CPU's.
public enum JPEGComparison {
    /// The peak signal-to-noise ratio of `picture` against `reference`, in dB, over every Y, Cb
    /// and Cr sample; infinity when they decode to the same samples. Throws `.encodeFailed` when
    /// either does not decode or their sizes or subsamplings differ.
    public static func psnr(_ picture: EncodedPicture, against reference: EncodedPicture) throws(ImagingError) -> Double {
        guard let decompressor = tjInitDecompress() else {
            throw ImagingError(.allocationFailed, "cannot create a TurboJPEG decompressor")
        }
        defer { tjDestroy(decompressor) }
        let first = try planes(of: picture, decompressor)
        let second = try planes(of: reference, decompressor)
        guard first.width == second.width, first.height == second.height, first.subsampling == second.subsampling else {
            throw ImagingError(
                .encodeFailed,
                "the JPEGs differ in shape: \(first.width)x\(first.height) subsampling \(first.subsampling) against "
                    + "\(second.width)x\(second.height) subsampling \(second.subsampling)")
        }
        var squares = 0.0
        for index in first.samples.indices {
            let difference = Double(Int(first.samples[index]) - Int(second.samples[index]))
            squares += difference * difference
        }
        guard squares > 0 else { return .infinity }
        let meanSquare = squares / Double(first.samples.count)
        return 10 * log10(255 * 255 / meanSquare)
    }

    private static func planes(
        of picture: EncodedPicture, _ decompressor: tjhandle
    ) throws(ImagingError) -> (width: Int, height: Int, subsampling: Int32, samples: [UInt8]) {
        guard picture.format == .jpeg else { throw ImagingError(.encodeFailed, "not a JPEG: \(picture.format.rawValue)") }
        var width: Int32 = 0
        var height: Int32 = 0
        var subsampling: Int32 = 0
        var colorspace: Int32 = 0
        let bytes = picture.bytes.bindMemory(to: UInt8.self)
        guard tjDecompressHeader3(decompressor, bytes.baseAddress, UInt(bytes.count), &width, &height, &subsampling, &colorspace) == 0
        else { throw ImagingError(.encodeFailed, "TurboJPEG cannot read the JPEG's header") }
        let size = tjBufSizeYUV2(width, 1, height, subsampling)
        guard size != UInt(bitPattern: -1), size > 0 else {
            throw ImagingError(.encodeFailed, "TurboJPEG cannot size a \(width)x\(height) picture's planes")
        }
        var samples = [UInt8](repeating: 0, count: Int(size))
        let status = samples.withUnsafeMutableBufferPointer { output in
            tjDecompressToYUV2(decompressor, bytes.baseAddress, UInt(bytes.count), output.baseAddress, width, 1, height, 0)
        }
        guard status == 0 else { throw ImagingError(.encodeFailed, "TurboJPEG cannot decode the JPEG") }
        withExtendedLifetime(picture) {}
        return (Int(width), Int(height), subsampling, samples)
    }
}
