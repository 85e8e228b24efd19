#if canImport(Glibc)
    import Glibc
#endif

/// The process's resident memory (RSS), as the kernel counts it: the second field of
/// `/proc/self/statm`, in pages. What an operator compares with a container's memory limit.
enum ProcessMemory {
    static func residentBytes() -> Int? {
        let file = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { close(file) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = buffer.withUnsafeMutableBytes { read(file, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        let fields = buffer[..<count].split(separator: UInt8(ascii: " "))
        let pageSize = sysconf(Int32(_SC_PAGESIZE))
        guard fields.count >= 2, pageSize > 0, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return pages * pageSize
    }
}
