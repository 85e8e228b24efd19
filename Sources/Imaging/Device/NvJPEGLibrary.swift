import CFFmpeg
import Decoding

#if canImport(Glibc)
    import Glibc
#endif

/// The CUDA driver calls and the nvJPEG calls the device JPEG path makes, loaded at run time:
/// `libnvjpeg.so.12` (NVIDIA's `nvidia-nvjpeg-cu12` wheel; it loads libcuda itself) and
/// `libcuda.so.1`, so the binary has no build or link dependency on either and a machine
/// without them simply encodes on the CPU. The signatures are nvjpeg.h's (12.4) and cuda.h's;
/// every status is an Int32 (0: success), every handle an opaque pointer, every device
/// address a UInt64 (CUdeviceptr).
///
/// Every stored property is a constant C function pointer; the libraries stay loaded for the
/// life of the process.
final class NvJPEGLibrary: Sendable {
    typealias Status = Int32
    typealias Handle = UnsafeMutableRawPointer
    typealias HandleOut = UnsafeMutablePointer<Handle?>

    static let nvjpegLibrary = "libnvjpeg.so.12"
    static let cudaLibrary = "libcuda.so.1"

    /// The process's libraries, loaded on first use; the failure says why there are none.
    static let shared: Result<NvJPEGLibrary, DeviceJPEGError> = load(nvjpeg: nvjpegLibrary, cuda: cudaLibrary)

    let deviceCount: Int

    // CUDA driver API
    let ctxPushCurrent: @convention(c) (Handle?) -> Status
    let ctxPopCurrent: @convention(c) (HandleOut?) -> Status
    let streamCreate: @convention(c) (HandleOut?, UInt32) -> Status
    let streamDestroy: @convention(c) (Handle?) -> Status
    let streamSynchronize: @convention(c) (Handle?) -> Status
    let memAllocPitch: @convention(c) (UnsafeMutablePointer<UInt64>?, UnsafeMutablePointer<Int>?, Int, Int, UInt32) -> Status
    let memAlloc: @convention(c) (UnsafeMutablePointer<UInt64>?, Int) -> Status
    let memFree: @convention(c) (UInt64) -> Status
    let memcpyHtoD: @convention(c) (UInt64, UnsafeRawPointer?, Int) -> Status
    let moduleLoadData: @convention(c) (HandleOut?, UnsafeRawPointer?) -> Status
    let moduleUnload: @convention(c) (Handle?) -> Status
    let moduleGetFunction: @convention(c) (HandleOut?, Handle?, UnsafePointer<CChar>?) -> Status
    let launchKernel:
        @convention(c) (
            Handle?, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, Handle?,
            UnsafeMutablePointer<UnsafeMutableRawPointer?>?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?
        ) -> Status
    private let getErrorName: (@convention(c) (Status, UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Status)?

    // nvJPEG
    let create: @convention(c) (HandleOut?) -> Status
    let destroy: @convention(c) (Handle?) -> Status
    let encoderStateCreate: @convention(c) (Handle?, HandleOut?, Handle?) -> Status
    let encoderStateDestroy: @convention(c) (Handle?) -> Status
    let encoderParamsCreate: @convention(c) (Handle?, HandleOut?, Handle?) -> Status
    let encoderParamsDestroy: @convention(c) (Handle?) -> Status
    let encoderParamsSetQuality: @convention(c) (Handle?, Int32, Handle?) -> Status
    let encoderParamsSetSamplingFactors: @convention(c) (Handle?, Int32, Handle?) -> Status
    let encoderParamsSetOptimizedHuffman: @convention(c) (Handle?, Int32, Handle?) -> Status
    /// nvjpegEncodeYUV(handle, state, params, const nvjpegImage_t *source, subsampling, width, height, stream)
    let encodeYUV: @convention(c) (Handle?, Handle?, Handle?, UnsafeRawPointer?, Int32, Int32, Int32, Handle?) -> Status
    /// nvjpegEncodeRetrieveBitstream(handle, state, data, &length, stream)
    let retrieveBitstream: @convention(c) (Handle?, Handle?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<Int>?, Handle?) -> Status

    // nvjpeg.h's enumerations and the driver's flags
    static let chromaSubsampling420: Int32 = 2  // NVJPEG_CSS_420
    static let streamDefault: UInt32 = 0  // CU_STREAM_DEFAULT: ordered after the legacy default stream

    private init(deviceCount: Int, resolve: (String) -> UnsafeMutableRawPointer?) throws(DeviceJPEGError) {
        func function<T>(_ name: String, _ type: T.Type) throws(DeviceJPEGError) -> T {
            guard let pointer = resolve(name) else { throw DeviceJPEGError("\(name) is missing") }
            return unsafeBitCast(pointer, to: type)
        }
        self.deviceCount = deviceCount
        ctxPushCurrent = try function("cuCtxPushCurrent_v2", (@convention(c) (Handle?) -> Status).self)
        ctxPopCurrent = try function("cuCtxPopCurrent_v2", (@convention(c) (HandleOut?) -> Status).self)
        streamCreate = try function("cuStreamCreate", (@convention(c) (HandleOut?, UInt32) -> Status).self)
        streamDestroy = try function("cuStreamDestroy_v2", (@convention(c) (Handle?) -> Status).self)
        streamSynchronize = try function("cuStreamSynchronize", (@convention(c) (Handle?) -> Status).self)
        memAllocPitch = try function(
            "cuMemAllocPitch_v2",
            (@convention(c) (UnsafeMutablePointer<UInt64>?, UnsafeMutablePointer<Int>?, Int, Int, UInt32) -> Status).self)
        memAlloc = try function("cuMemAlloc_v2", (@convention(c) (UnsafeMutablePointer<UInt64>?, Int) -> Status).self)
        memFree = try function("cuMemFree_v2", (@convention(c) (UInt64) -> Status).self)
        memcpyHtoD = try function("cuMemcpyHtoD_v2", (@convention(c) (UInt64, UnsafeRawPointer?, Int) -> Status).self)
        moduleLoadData = try function("cuModuleLoadData", (@convention(c) (HandleOut?, UnsafeRawPointer?) -> Status).self)
        moduleUnload = try function("cuModuleUnload", (@convention(c) (Handle?) -> Status).self)
        moduleGetFunction = try function(
            "cuModuleGetFunction", (@convention(c) (HandleOut?, Handle?, UnsafePointer<CChar>?) -> Status).self)
        launchKernel = try function(
            "cuLaunchKernel",
            (@convention(c) (
                Handle?, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, Handle?,
                UnsafeMutablePointer<UnsafeMutableRawPointer?>?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?
            ) -> Status).self)
        getErrorName = resolve("cuGetErrorName").map {
            unsafeBitCast($0, to: (@convention(c) (Status, UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Status).self)
        }
        create = try function("nvjpegCreateSimple", (@convention(c) (HandleOut?) -> Status).self)
        destroy = try function("nvjpegDestroy", (@convention(c) (Handle?) -> Status).self)
        encoderStateCreate = try function(
            "nvjpegEncoderStateCreate", (@convention(c) (Handle?, HandleOut?, Handle?) -> Status).self)
        encoderStateDestroy = try function("nvjpegEncoderStateDestroy", (@convention(c) (Handle?) -> Status).self)
        encoderParamsCreate = try function(
            "nvjpegEncoderParamsCreate", (@convention(c) (Handle?, HandleOut?, Handle?) -> Status).self)
        encoderParamsDestroy = try function("nvjpegEncoderParamsDestroy", (@convention(c) (Handle?) -> Status).self)
        encoderParamsSetQuality = try function(
            "nvjpegEncoderParamsSetQuality", (@convention(c) (Handle?, Int32, Handle?) -> Status).self)
        encoderParamsSetSamplingFactors = try function(
            "nvjpegEncoderParamsSetSamplingFactors", (@convention(c) (Handle?, Int32, Handle?) -> Status).self)
        encoderParamsSetOptimizedHuffman = try function(
            "nvjpegEncoderParamsSetOptimizedHuffman", (@convention(c) (Handle?, Int32, Handle?) -> Status).self)
        encodeYUV = try function(
            "nvjpegEncodeYUV",
            (@convention(c) (Handle?, Handle?, Handle?, UnsafeRawPointer?, Int32, Int32, Int32, Handle?) -> Status).self)
        retrieveBitstream = try function(
            "nvjpegEncodeRetrieveBitstream",
            (@convention(c) (Handle?, Handle?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<Int>?, Handle?) -> Status)
                .self)
    }

    /// Loads both libraries, resolves every function, calls cuInit and counts devices. Never
    /// throws: each failure (no library, a missing symbol, no device) is the error, worded for
    /// `/system`.
    static func load(nvjpeg: String, cuda: String) -> Result<NvJPEGLibrary, DeviceJPEGError> {
        guard let nvjpegHandle = dlopen(nvjpeg, RTLD_NOW | RTLD_LOCAL) else {
            let detail = dlerror().map { String(cString: $0) } ?? "not found"
            return .failure(DeviceJPEGError("\(nvjpeg) not found (\(detail))"))
        }
        guard let cudaHandle = dlopen(cuda, RTLD_NOW | RTLD_LOCAL) else {
            let detail = dlerror().map { String(cString: $0) } ?? "not found"
            return .failure(DeviceJPEGError("the NVIDIA driver's \(cuda) not found (\(detail))"))
        }
        typealias IntOut = @convention(c) (UnsafeMutablePointer<Int32>?) -> Int32
        guard let cuInit = dlsym(cudaHandle, "cuInit").map({ unsafeBitCast($0, to: (@convention(c) (UInt32) -> Int32).self) }),
            let getCount = dlsym(cudaHandle, "cuDeviceGetCount").map({ unsafeBitCast($0, to: IntOut.self) })
        else {
            return .failure(DeviceJPEGError("\(cuda) lacks cuInit or cuDeviceGetCount"))
        }
        let initStatus = cuInit(0)
        guard initStatus == 0 else { return .failure(DeviceJPEGError("cuInit failed (CUDA error \(initStatus)): no usable GPU")) }
        var count: Int32 = 0
        let countStatus = getCount(&count)
        guard countStatus == 0, count > 0 else {
            return .failure(DeviceJPEGError("no CUDA device (cuDeviceGetCount: status \(countStatus), \(count) devices)"))
        }
        do throws(DeviceJPEGError) {
            let library = try NvJPEGLibrary(deviceCount: Int(count)) { name in
                dlsym(name.hasPrefix("nvjpeg") ? nvjpegHandle : cudaHandle, name)
            }
            return .success(library)
        } catch {
            return .failure(DeviceJPEGError("\(nvjpeg) or \(cuda) is unusable: \(error)"))
        }
    }

    /// "CUDA_ERROR_INVALID_VALUE (1)"; just the number when the driver cannot name it.
    func cudaErrorName(_ status: Status) -> String {
        var name: UnsafePointer<CChar>?
        if let getErrorName, getErrorName(status, &name) == 0, let name {
            return "\(String(cString: name)) (\(status))"
        }
        return "CUDA error \(status)"
    }

    /// nvjpegStatus_t's names (nvjpeg.h).
    static func nvjpegStatusName(_ status: Status) -> String {
        let names = [
            "NVJPEG_STATUS_SUCCESS", "NVJPEG_STATUS_NOT_INITIALIZED", "NVJPEG_STATUS_INVALID_PARAMETER",
            "NVJPEG_STATUS_BAD_JPEG", "NVJPEG_STATUS_JPEG_NOT_SUPPORTED", "NVJPEG_STATUS_ALLOCATOR_FAILURE",
            "NVJPEG_STATUS_EXECUTION_FAILED", "NVJPEG_STATUS_ARCH_MISMATCH", "NVJPEG_STATUS_INTERNAL_ERROR",
            "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED", "NVJPEG_STATUS_INCOMPLETE_BITSTREAM",
        ]
        return names.indices.contains(Int(status)) ? "\(names[Int(status)]) (\(status))" : "nvJPEG status \(status)"
    }
}

/// The real machine: `NvJPEGLibrary.shared`.
struct NvJPEGPlatform: DeviceJPEGPlatform {
    var unavailability: String? {
        if case .failure(let error) = NvJPEGLibrary.shared { return error.description }
        return nil
    }

    var description: String {
        let devices = (try? NvJPEGLibrary.shared.get().deviceCount) ?? 0
        return "\(NvJPEGLibrary.nvjpegLibrary) loaded and \(devices) CUDA device\(devices == 1 ? "" : "s") present"
    }

    func makeBackend() throws(DeviceJPEGError) -> any DeviceJPEGBackend {
        NvJPEGBackend(library: try NvJPEGLibrary.shared.get())
    }
}
