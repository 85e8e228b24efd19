import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif

/// The few CUDA driver API calls FrameTap needs to list NVIDIA GPUs, loaded at run time with
/// `dlopen("libcuda.so.1")`: the binary has no build or link dependency on CUDA, and machines
/// without the NVIDIA driver simply report no CUDA devices. libavutil loads the same library
/// itself when it opens a CUDA device context; this is only for counting and describing devices.
///
/// Every stored property is a constant C function pointer, and the driver API functions are
/// thread-safe (CUDA driver API guarantee). The library handle is not kept: it stays open for
/// the life of the process, as libavutil's own does.
final class CUDADriver: Sendable {

    /// The process's driver, loaded on first use; the failure says why there is none.
    static let shared: Result<CUDADriver, DecodeError> = load(library: "libcuda.so.1")

    let library: String
    private let driverGetVersion: @convention(c) (UnsafeMutablePointer<Int32>?) -> Int32
    private let deviceGetCount: @convention(c) (UnsafeMutablePointer<Int32>?) -> Int32
    private let deviceGet: @convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32
    private let deviceGetName: @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32) -> Int32
    private let deviceTotalMem: @convention(c) (UnsafeMutablePointer<Int>?, Int32) -> Int32
    private let getErrorName: (@convention(c) (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32)?
    /// For streams of their own (`CUDAStreams`); nil when this driver lacks one of them.
    let streamFunctions: StreamFunctions?

    struct StreamFunctions: Sendable {
        let pushContext: @convention(c) (OpaquePointer?) -> Int32
        let popContext: @convention(c) (UnsafeMutablePointer<OpaquePointer?>?) -> Int32
        let createStream: @convention(c) (UnsafeMutablePointer<OpaquePointer?>?, UInt32) -> Int32
        let destroyStream: @convention(c) (OpaquePointer?) -> Int32
    }

    private init(
        library: String,
        driverGetVersion: @escaping @convention(c) (UnsafeMutablePointer<Int32>?) -> Int32,
        deviceGetCount: @escaping @convention(c) (UnsafeMutablePointer<Int32>?) -> Int32,
        deviceGet: @escaping @convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32,
        deviceGetName: @escaping @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32) -> Int32,
        deviceTotalMem: @escaping @convention(c) (UnsafeMutablePointer<Int>?, Int32) -> Int32,
        getErrorName: (@convention(c) (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32)?,
        streamFunctions: StreamFunctions?
    ) {
        self.library = library
        self.driverGetVersion = driverGetVersion
        self.deviceGetCount = deviceGetCount
        self.deviceGet = deviceGet
        self.deviceGetName = deviceGetName
        self.deviceTotalMem = deviceTotalMem
        self.getErrorName = getErrorName
        self.streamFunctions = streamFunctions
    }

    /// Loads `library`, resolves the functions and calls `cuInit(0)`. Never throws: every failure
    /// (no library, a missing symbol, cuInit failing because there is no GPU) is the error.
    /// The handle stays open for the life of the process, as libavutil's own does.
    static func load(library: String) -> Result<CUDADriver, DecodeError> {
        guard let handle = dlopen(library, RTLD_NOW | RTLD_LOCAL) else {
            let detail = dlerror().map { String(cString: $0) } ?? "not found"
            return .failure(DecodeError(.decoderUnavailable, "cannot load the NVIDIA driver (\(detail))"))
        }
        func symbol<T>(_ name: String, as type: T.Type) -> T? {
            dlsym(handle, name).map { unsafeBitCast($0, to: type) }
        }
        typealias IntOut = @convention(c) (UnsafeMutablePointer<Int32>?) -> Int32
        guard let cuInit = symbol("cuInit", as: (@convention(c) (UInt32) -> Int32).self),
            let driverGetVersion = symbol("cuDriverGetVersion", as: IntOut.self),
            let deviceGetCount = symbol("cuDeviceGetCount", as: IntOut.self),
            let deviceGet = symbol(
                "cuDeviceGet", as: (@convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32).self),
            let deviceGetName = symbol(
                "cuDeviceGetName", as: (@convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32) -> Int32).self),
            let deviceTotalMem = symbol(
                "cuDeviceTotalMem_v2", as: (@convention(c) (UnsafeMutablePointer<Int>?, Int32) -> Int32).self)
        else {
            dlclose(handle)
            return .failure(DecodeError(.decoderUnavailable, "\(library) lacks a CUDA driver API function"))
        }
        let driver = CUDADriver(
            library: library, driverGetVersion: driverGetVersion, deviceGetCount: deviceGetCount,
            deviceGet: deviceGet, deviceGetName: deviceGetName, deviceTotalMem: deviceTotalMem,
            getErrorName: symbol(
                "cuGetErrorName",
                as: (@convention(c) (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32).self),
            streamFunctions: {
                guard let push = symbol("cuCtxPushCurrent_v2", as: (@convention(c) (OpaquePointer?) -> Int32).self),
                    let pop = symbol(
                        "cuCtxPopCurrent_v2", as: (@convention(c) (UnsafeMutablePointer<OpaquePointer?>?) -> Int32).self),
                    let create = symbol(
                        "cuStreamCreate",
                        as: (@convention(c) (UnsafeMutablePointer<OpaquePointer?>?, UInt32) -> Int32).self),
                    let destroy = symbol("cuStreamDestroy_v2", as: (@convention(c) (OpaquePointer?) -> Int32).self)
                else { return nil }
                return StreamFunctions(pushContext: push, popContext: pop, createStream: create, destroyStream: destroy)
            }())
        let status = cuInit(0)
        guard status == 0 else {
            return .failure(DecodeError(.decoderUnavailable, "cuInit failed: \(driver.errorName(status))"))
        }
        return .success(driver)
    }

    /// e.g. "12.8" (cuDriverGetVersion's 12080).
    var version: String? {
        var version: Int32 = 0
        guard driverGetVersion(&version) == 0 else { return nil }
        return "\(version / 1000).\(version % 1000 / 10)"
    }

    func deviceCount() -> Result<Int, DecodeError> {
        var count: Int32 = 0
        let status = deviceGetCount(&count)
        guard status == 0 else {
            return .failure(DecodeError(.decoderUnavailable, "cuDeviceGetCount failed: \(errorName(status))"))
        }
        return .success(Int(count))
    }

    struct DeviceFacts {
        var name: String?
        var totalMemoryBytes: Int?
    }

    func facts(ordinal: Int) -> Result<DeviceFacts, DecodeError> {
        var device: Int32 = 0
        let status = deviceGet(&device, Int32(clamping: ordinal))
        guard status == 0 else {
            return .failure(DecodeError(.decoderUnavailable, "cuDeviceGet(\(ordinal)) failed: \(errorName(status))"))
        }
        var facts = DeviceFacts()
        var name = [CChar](repeating: 0, count: 256)
        if deviceGetName(&name, Int32(name.count - 1), device) == 0 {
            facts.name = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        var bytes = 0
        if deviceTotalMem(&bytes, device) == 0 { facts.totalMemoryBytes = bytes }
        return .success(facts)
    }

    /// "CUDA_ERROR_NO_DEVICE (100)"; just the number when the driver cannot name it.
    func errorName(_ status: Int32) -> String {
        var name: UnsafePointer<CChar>?
        if let getErrorName, getErrorName(status, &name) == 0, let name {
            return "\(String(cString: name)) (\(status))"
        }
        return "CUDA error \(status)"
    }
}
