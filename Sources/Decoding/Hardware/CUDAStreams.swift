import CFFmpeg

/// How the decoders sharing one CUDA device context order their work on the GPU.
public enum CUDAStreamMode: String, Sendable, CaseIterable {
    /// Each decoder gets a CUDA stream of its own inside the device's one context, so one
    /// session's copies and downloads wait only for its own work.
    case perDecoder = "per-decoder"
    /// Every decoder uses the context's default stream (libavutil's default): a download waits
    /// for every other session's queued work on the device.
    case shared
}

/// Per-decoder device contexts over one shared CUDA context.
///
/// libavutil's CUDA device context carries the stream that NVDEC's picture mapping, surface
/// copies and downloads are queued on. Opened the usual way it is NULL, the context's default
/// stream, so every session on a shared context is serialized with every other: one download's
/// `cuStreamSynchronize` waits for all of them. A second `AVHWDeviceContext` that borrows the
/// same `CUcontext` (no new context: no 0.25 s, no extra GPU memory) but names a stream of its
/// own gives each decoder its own queue. Its `free` callback destroys the stream once the last
/// reference (the codec context's, a picture's frames context) is gone, and it holds a reference
/// to the shared context so the borrowed `CUcontext` outlives it.
///
/// libavutil reads the surface alignment from device 0 for a borrowed context (it does not know
/// the ordinal); the alignment is a property of the GPU model, alike on the cards of one host.
enum CUDAStreams {
    /// A device context for one decoder sharing `shared`'s CUDA context with a stream of its
    /// own, or nil when the driver lacks the stream functions or the stream cannot be made (the
    /// caller then decodes on the shared context, as before).
    static func decoderContext(sharing shared: UnsafeMutablePointer<AVBufferRef>) -> UnsafeMutablePointer<AVBufferRef>? {
        guard case .success(let driver) = CUDADriver.shared, let functions = driver.streamFunctions,
            let sharedDevice = UnsafeMutableRawPointer(shared.pointee.data)?.assumingMemoryBound(to: AVHWDeviceContext.self),
            let cudaContext = ft_cuda_device_context(sharedDevice).pointee.cuda_ctx
        else { return nil }
        var stream: OpaquePointer?
        guard functions.pushContext(OpaquePointer(cudaContext)) == 0 else { return nil }
        let created = functions.createStream(&stream, nonBlocking)
        var popped: OpaquePointer?
        _ = functions.popContext(&popped)
        guard created == 0, let stream else { return nil }

        guard let buffer = av_hwdevice_ctx_alloc(AV_HWDEVICE_TYPE_CUDA),
            let device = UnsafeMutableRawPointer(buffer.pointee.data)?.assumingMemoryBound(to: AVHWDeviceContext.self)
        else {
            destroy(stream, in: cudaContext)
            return nil
        }
        let cuda = ft_cuda_device_context(device)!
        cuda.pointee.cuda_ctx = cudaContext
        cuda.pointee.stream = UnsafeMutableRawPointer(stream)
        device.pointee.user_opaque = UnsafeMutableRawPointer(av_buffer_ref(shared))
        // libavutil calls this after its own uninit, which leaves a borrowed CUcontext alone;
        // from here on every failure path frees through it too.
        device.pointee.free = { device in
            guard let device else { return }
            let cuda = ft_cuda_device_context(device)!
            if let stream = cuda.pointee.stream, let context = cuda.pointee.cuda_ctx {
                CUDAStreams.destroy(OpaquePointer(stream), in: context)
            }
            var borrowed = device.pointee.user_opaque?.assumingMemoryBound(to: AVBufferRef.self)
            av_buffer_unref(&borrowed)
        }
        guard av_hwdevice_ctx_init(buffer) >= 0 else {
            var failed: UnsafeMutablePointer<AVBufferRef>? = buffer
            av_buffer_unref(&failed)
            return nil
        }
        return buffer
    }

    /// CU_STREAM_NON_BLOCKING: no implicit ordering with the context's default stream, which
    /// other libraries in the process may use.
    private static let nonBlocking: UInt32 = 1

    fileprivate static func destroy(_ stream: OpaquePointer, in context: UnsafeMutableRawPointer) {
        guard case .success(let driver) = CUDADriver.shared, let functions = driver.streamFunctions else { return }
        guard functions.pushContext(OpaquePointer(context)) == 0 else { return }
        _ = functions.destroyStream(stream)
        var popped: OpaquePointer?
        _ = functions.popContext(&popped)
    }
}

extension HardwareDeviceLease {
    /// The device context a new decoder on this lease opens with: for CUDA with
    /// `.perDecoder`, one of its own over the shared CUDA context (`CUDAStreams`); otherwise,
    /// or when that cannot be made, the shared one.
    public func decoderContext(streams: CUDAStreamMode) -> HardwareDeviceContext {
        guard device.kind == .cuda, streams == .perDecoder, let shared = opened.context.buffer,
            let own = CUDAStreams.decoderContext(sharing: shared)
        else { return opened.context }
        return HardwareDeviceContext(taking: own)
    }
}
