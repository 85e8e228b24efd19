import CFFmpeg
import Decoding

/// Device JPEG with nvJPEG, from the NV12 surfaces NVDEC decodes into (libavcodec's
/// `AV_PIX_FMT_CUDA` frames): `JPEGInputKernels` copy the picture into a planar 4:2:0 scratch
/// picture on the device (de-interleaving the chroma and making the samples JPEG's, BT.601 at
/// full range, as the CPU encoder does), nvjpegEncodeYUV compresses it, and only the JPEG comes
/// back over PCIe.
///
/// nvJPEG works through the CUDA runtime, which uses the driver context current on the calling
/// thread: each call runs with the surface's own context pushed (the decoder's, from its
/// AVCUDADeviceContext), on this backend's own stream. Everything it makes (nvJPEG handle,
/// state, parameters, stream, kernels, tables, scratch picture) belongs to that one context
/// and is made again if a surface of another context arrives, or after any error (a failed
/// call may leave any of it unusable).
final class NvJPEGBackend: DeviceJPEGBackend {
    private let library: NvJPEGLibrary
    private var resources: ContextResources?
    /// The JPEG, copied back from the device; grows, never shrinks.
    private var output: UnsafeMutablePointer<UInt8>?
    private var outputCapacity = 0

    init(library: NvJPEGLibrary) {
        self.library = library
    }

    deinit {
        resources?.release()
        output?.deallocate()
    }

    func encodeJPEG(
        _ surface: UnsafePointer<AVFrame>, width: Int, height: Int, mapping: DeviceSampleMapping, quality: Int
    ) throws(DeviceJPEGError) -> UnsafeRawBufferPointer {
        let source = try SurfaceNV12(surface, width: width, height: height)
        let library = library
        try check(library.ctxPushCurrent(source.context), "cuCtxPushCurrent")
        defer {
            var popped: NvJPEGLibrary.Handle?
            _ = library.ctxPopCurrent(&popped)
        }
        do throws(DeviceJPEGError) {
            if let resources, resources.context != source.context {
                resources.release()
                self.resources = nil
            }
            let resources: ContextResources
            if let existing = self.resources {
                resources = existing
            } else {
                resources = try ContextResources(library: library, context: source.context)
                self.resources = resources
            }
            return try encode(source, with: resources, mapping: mapping, quality: quality)
        } catch {
            resources?.release()
            resources = nil
            throw error
        }
    }

    private func encode(
        _ source: SurfaceNV12, with resources: ContextResources, mapping: DeviceSampleMapping, quality: Int
    ) throws(DeviceJPEGError) -> UnsafeRawBufferPointer {
        let library = library
        let stream = resources.stream
        // The decoder may have written the surface on a stream of its own; ours is ordered
        // after the legacy default stream only.
        if let decoderStream = source.decoderStream {
            try check(library.streamSynchronize(decoderStream), "cuStreamSynchronize (the decoder's stream)")
        }
        let scratch = try resources.scratch(width: source.width, height: source.height)
        let planar = JPEGInputKernels.PlanarPicture(base: scratch.base, pitch: scratch.pitch)
        for kernel in JPEGInputKernels.launches(from: source.picture, to: planar, mapping: mapping, tables: resources.tables) {
            try launch(resources.function(kernel.function), columns: kernel.columns, rows: kernel.rows, stream: stream, kernel.arguments)
        }
        let (_, outputU, outputV) = planar.planes(height: source.height)
        try resources.setQuality(quality)
        var image = NvJPEGImage()
        image.channel = (
            UnsafeMutableRawPointer(bitPattern: UInt(scratch.base)), UnsafeMutableRawPointer(bitPattern: UInt(outputU)),
            UnsafeMutableRawPointer(bitPattern: UInt(outputV)), nil
        )
        image.pitch = (scratch.pitch, scratch.pitch, scratch.pitch, 0)
        let encodeStatus = withUnsafePointer(to: &image) { image in
            library.encodeYUV(
                resources.handle, resources.state, resources.params, UnsafeRawPointer(image),
                NvJPEGLibrary.chromaSubsampling420, Int32(source.width), Int32(source.height), stream)
        }
        try checkNvJPEG(encodeStatus, "nvjpegEncodeYUV")
        try check(library.streamSynchronize(stream), "cuStreamSynchronize (after nvjpegEncodeYUV)")
        var length = 0
        try checkNvJPEG(
            library.retrieveBitstream(resources.handle, resources.state, nil, &length, stream),
            "nvjpegEncodeRetrieveBitstream (length)")
        try check(library.streamSynchronize(stream), "cuStreamSynchronize (after the length)")
        guard length > 0 else { throw DeviceJPEGError("nvjpegEncodeRetrieveBitstream reported an empty JPEG") }
        if length > outputCapacity {
            output?.deallocate()
            output = UnsafeMutablePointer<UInt8>.allocate(capacity: length)
            outputCapacity = length
        }
        try checkNvJPEG(
            library.retrieveBitstream(resources.handle, resources.state, output, &length, stream),
            "nvjpegEncodeRetrieveBitstream")
        try check(library.streamSynchronize(stream), "cuStreamSynchronize (after the JPEG)")
        guard length > 0, length <= outputCapacity else {
            throw DeviceJPEGError("nvjpegEncodeRetrieveBitstream returned \(length) bytes for a \(outputCapacity)-byte buffer")
        }
        return UnsafeRawBufferPointer(start: output, count: length)
    }

    private func launch(
        _ function: NvJPEGLibrary.Handle?, columns: Int, rows: Int, stream: NvJPEGLibrary.Handle?, _ arguments: [UInt64]
    ) throws(DeviceJPEGError) {
        var arguments = arguments
        let gridX = UInt32((columns + JPEGInputKernels.blockWidth - 1) / JPEGInputKernels.blockWidth)
        let gridY = UInt32((rows + JPEGInputKernels.blockHeight - 1) / JPEGInputKernels.blockHeight)
        let library = library
        let status = arguments.withUnsafeMutableBufferPointer { values in
            var pointers: [UnsafeMutableRawPointer?] = (0..<values.count).map {
                UnsafeMutableRawPointer(values.baseAddress! + $0)
            }
            return pointers.withUnsafeMutableBufferPointer { pointers in
                library.launchKernel(
                    function, gridX, gridY, 1, UInt32(JPEGInputKernels.blockWidth), UInt32(JPEGInputKernels.blockHeight), 1, 0,
                    stream, pointers.baseAddress, nil)
            }
        }
        try check(status, "cuLaunchKernel")
    }

    private func check(_ status: NvJPEGLibrary.Status, _ call: String) throws(DeviceJPEGError) {
        guard status == 0 else { throw DeviceJPEGError("\(call) failed: \(library.cudaErrorName(status))") }
    }

    private func checkNvJPEG(_ status: NvJPEGLibrary.Status, _ call: String) throws(DeviceJPEGError) {
        guard status == 0 else { throw DeviceJPEGError("\(call) failed: \(NvJPEGLibrary.nvjpegStatusName(status))") }
    }
}

/// nvjpeg.h's nvjpegImage_t: four plane addresses, four pitches (NVJPEG_MAX_COMPONENT = 4).
struct NvJPEGImage {
    var channel: (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) =
        (nil, nil, nil, nil)
    var pitch: (Int, Int, Int, Int) = (0, 0, 0, 0)
}

/// Where an NV12 CUDA surface's visible picture is: its context, the decoder's stream, and the
/// luma and interleaved chroma planes moved past the left and top crop.
struct SurfaceNV12 {
    let context: NvJPEGLibrary.Handle
    let decoderStream: NvJPEGLibrary.Handle?
    let picture: JPEGInputKernels.NV12Picture
    var width: Int { picture.width }
    var height: Int { picture.height }

    init(_ surface: UnsafePointer<AVFrame>, width: Int, height: Int) throws(DeviceJPEGError) {
        guard AVPixelFormat(surface.pointee.format) == AV_PIX_FMT_CUDA else {
            throw DeviceJPEGError("the picture is not a CUDA surface (pixel format \(surface.pointee.format))")
        }
        guard let framesRef = surface.pointee.hw_frames_ctx, let framesData = framesRef.pointee.data else {
            throw DeviceJPEGError("the CUDA surface has no frames context")
        }
        let frames = UnsafeRawPointer(framesData).assumingMemoryBound(to: AVHWFramesContext.self)
        guard frames.pointee.sw_format == AV_PIX_FMT_NV12 else {
            let name = av_get_pix_fmt_name(frames.pointee.sw_format).map { String(cString: $0) } ?? "unknown"
            throw DeviceJPEGError("the CUDA surface holds \(name), not nv12")
        }
        guard let device = frames.pointee.device_ctx, let cuda = ft_cuda_device_context(device),
            let context = cuda.pointee.cuda_ctx
        else { throw DeviceJPEGError("the CUDA surface's device context has no CUcontext") }
        let decoderStream = cuda.pointee.stream
        let left = Int(surface.pointee.crop_left)
        let top = Int(surface.pointee.crop_top)
        guard left % 2 == 0, top % 2 == 0 else {
            throw DeviceJPEGError("the CUDA surface's crop (\(left), \(top)) splits a chroma sample")
        }
        let lumaPitch = Int(surface.pointee.linesize.0)
        let chromaPitch = Int(surface.pointee.linesize.1)
        // A chroma row holds (width + 1) / 2 Cb, Cr pairs: one byte more than the width when it is odd.
        guard let lumaBase = surface.pointee.data.0, let chromaBase = surface.pointee.data.1, lumaPitch >= width + left,
            chromaPitch >= 2 * ((width + 1) / 2) + left, width > 0, height > 0
        else { throw DeviceJPEGError("the CUDA surface lacks a plane or has a short pitch") }
        self.context = context
        self.decoderStream = decoderStream
        self.picture = JPEGInputKernels.NV12Picture(
            luma: UInt64(UInt(bitPattern: lumaBase)) + UInt64(top * lumaPitch + left), lumaPitch: lumaPitch,
            chroma: UInt64(UInt(bitPattern: chromaBase)) + UInt64(top / 2 * chromaPitch + left), chromaPitch: chromaPitch,
            width: width, height: height)
    }
}

/// What one backend made in one CUDA context. Made and released with that context current.
private final class ContextResources {
    let library: NvJPEGLibrary
    let context: NvJPEGLibrary.Handle
    private(set) var stream: NvJPEGLibrary.Handle?
    private(set) var handle: NvJPEGLibrary.Handle?
    private(set) var state: NvJPEGLibrary.Handle?
    private(set) var params: NvJPEGLibrary.Handle?
    private var module: NvJPEGLibrary.Handle?
    /// `JPEGInputKernels.functions`, by name.
    private var functions: [String: NvJPEGLibrary.Handle] = [:]
    /// `JPEGInputKernels.tables` on the device.
    private(set) var tables: UInt64 = 0
    private var scratchBase: UInt64 = 0
    private var scratchPitch = 0
    private var scratchSize = (width: 0, rows: 0)
    private var quality: Int?

    /// With `context` current.
    init(library: NvJPEGLibrary, context: NvJPEGLibrary.Handle) throws(DeviceJPEGError) {
        self.library = library
        self.context = context
        do throws(DeviceJPEGError) {
            try make()
        } catch {
            release()
            throw error
        }
    }

    private func make() throws(DeviceJPEGError) {
        try check(library.streamCreate(&stream, NvJPEGLibrary.streamDefault), "cuStreamCreate")
        let loaded = JPEGInputKernels.ptx.withCString { library.moduleLoadData(&module, $0) }
        try check(loaded, "cuModuleLoadData (the JPEG input kernels' PTX)")
        for name in JPEGInputKernels.functions {
            var function: NvJPEGLibrary.Handle?
            try check(library.moduleGetFunction(&function, module, name), "cuModuleGetFunction(\(name))")
            functions[name] = function
        }
        let bytes = JPEGInputKernels.tables
        try check(library.memAlloc(&tables, bytes.count), "cuMemAlloc (the kernels' tables)")
        try check(bytes.withUnsafeBytes { library.memcpyHtoD(tables, $0.baseAddress, bytes.count) }, "cuMemcpyHtoD (the kernels' tables)")
        try checkNvJPEG(library.create(&handle), "nvjpegCreateSimple")
        try checkNvJPEG(library.encoderStateCreate(handle, &state, stream), "nvjpegEncoderStateCreate")
        try checkNvJPEG(library.encoderParamsCreate(handle, &params, stream), "nvjpegEncoderParamsCreate")
        try checkNvJPEG(
            library.encoderParamsSetSamplingFactors(params, NvJPEGLibrary.chromaSubsampling420, stream),
            "nvjpegEncoderParamsSetSamplingFactors")
        // TurboJPEG's default: the standard Huffman tables, no optimisation pass.
        try checkNvJPEG(library.encoderParamsSetOptimizedHuffman(params, 0, stream), "nvjpegEncoderParamsSetOptimizedHuffman")
    }

    func function(_ name: String) throws(DeviceJPEGError) -> NvJPEGLibrary.Handle {
        guard let function = functions[name] else { throw DeviceJPEGError("no kernel \(name) in the module") }
        return function
    }

    func setQuality(_ wanted: Int) throws(DeviceJPEGError) {
        guard quality != wanted else { return }
        try checkNvJPEG(library.encoderParamsSetQuality(params, Int32(wanted), stream), "nvjpegEncoderParamsSetQuality")
        quality = wanted
    }

    /// The planar 4:2:0 scratch picture (Y rows, then U rows, then V rows, one pitch), grown to
    /// hold `width`×`height`.
    func scratch(width: Int, height: Int) throws(DeviceJPEGError) -> (base: UInt64, pitch: Int) {
        let rows = height + 2 * ((height + 1) / 2)
        if scratchBase == 0 || width > scratchSize.width || rows > scratchSize.rows {
            if scratchBase != 0 { _ = library.memFree(scratchBase) }
            scratchBase = 0
            var pitch = 0
            try check(library.memAllocPitch(&scratchBase, &pitch, width, rows, 4), "cuMemAllocPitch (\(width)x\(rows))")
            scratchPitch = pitch
            scratchSize = (width, rows)
        }
        return (scratchBase, scratchPitch)
    }

    /// Tolerates a half-made set; pushes its own context (which may not be the current one).
    func release() {
        guard library.ctxPushCurrent(context) == 0 else { return }  // the context is gone, and with it all of this
        defer {
            var popped: NvJPEGLibrary.Handle?
            _ = library.ctxPopCurrent(&popped)
        }
        if let stream { _ = library.streamSynchronize(stream) }
        if let params { _ = library.encoderParamsDestroy(params) }
        if let state { _ = library.encoderStateDestroy(state) }
        if let handle { _ = library.destroy(handle) }
        if scratchBase != 0 { _ = library.memFree(scratchBase) }
        if tables != 0 { _ = library.memFree(tables) }
        if let module { _ = library.moduleUnload(module) }
        functions = [:]
        if let stream { _ = library.streamDestroy(stream) }
        params = nil
        state = nil
        handle = nil
        scratchBase = 0
        tables = 0
        module = nil
        stream = nil
    }

    private func check(_ status: NvJPEGLibrary.Status, _ call: String) throws(DeviceJPEGError) {
        guard status == 0 else { throw DeviceJPEGError("\(call) failed: \(library.cudaErrorName(status))") }
    }

    private func checkNvJPEG(_ status: NvJPEGLibrary.Status, _ call: String) throws(DeviceJPEGError) {
        guard status == 0 else { throw DeviceJPEGError("\(call) failed: \(NvJPEGLibrary.nvjpegStatusName(status))") }
    }
}
