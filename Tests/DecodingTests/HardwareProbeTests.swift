import Decoding
import Foundation
import HardwareTestSupport
import Testing
import Timekeeping

/// HardwareProbe without a GPU: every failure is a clean per-node error, never a crash or a
/// libva message on stderr.
@Suite(.timeLimit(.minutes(10))) struct HardwareProbeTests {
    @Test func noRenderNodes() throws {
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("probe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        #expect(HardwareProbe.probe(directory: empty.path).renderNodes.isEmpty)
        #expect(HardwareProbe.probe(directory: "/nonexistent/dri").renderNodes.isEmpty)
        let report = HardwareProbe.probe(renderNodes: [])
        #expect(report.renderNodes.isEmpty)
        #expect(report.libavcodecVersion.split(separator: ".").count == 3)
        #expect(report.vaapiHeaderVersion.hasPrefix("1."))
    }

    @Test func regularFileIsNotARenderNode() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("renderD-fake-\(UUID().uuidString)").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data([1, 2, 3])))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let node = HardwareProbe.probeNode(path)
        #expect(node.path == path)
        #expect(node.error == "not a character device")
        #expect(!node.usable && node.h264Profiles.isEmpty && node.vendor == nil)
    }

    @Test func missingNode() {
        let node = HardwareProbe.probeNode("/nonexistent/renderD128")
        #expect(node.error?.hasPrefix("cannot open: No such file or directory") == true)
        #expect(!node.usable)
    }

    /// A character device that is no DRM device: libva refuses it (no display, or no driver).
    @Test func characterDeviceWithoutDriver() {
        let node = HardwareProbe.probeNode("/dev/null")
        let error = node.error ?? ""
        #expect(error.hasPrefix("vaGetDisplayDRM: ") || error.hasPrefix("vaInitialize: "), "\(error)")
        #expect(!node.usable && node.vaapiVersion == nil)
    }

    /// In a directory: each node reported in order, each with its own error.
    @Test func everyNodeReported() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dri-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for name in ["renderD129", "renderD128", "card0"] {
            #expect(FileManager.default.createFile(atPath: directory.appendingPathComponent(name).path, contents: Data()))
        }
        let report = HardwareProbe.probe(directory: directory.path)
        #expect(report.renderNodes.map { ($0.path as NSString).lastPathComponent } == ["renderD128", "renderD129"])
        #expect(report.renderNodes.allSatisfy { $0.error == "not a character device" })
        #expect(report.renderNodes.allSatisfy { $0.vendor == nil && !$0.usable })
    }

    /// What a node decodes follows the profiles libva lists: H.264 with any H.264 profile,
    /// H.265 with Main (8-bit) or Main10 (10-bit); range-extension profiles alone give no H.265.
    @Test func capabilitiesFollowTheListedProfiles() {
        func decodes(_ h264: [String], _ hevc: [String]) -> [String] {
            RenderNodeReport(path: "/dev/dri/renderD128", h264Profiles: h264, hevcProfiles: hevc).capabilities
                .map { "\($0.codec.rawValue)/\($0.maxBitDepth)" }
        }
        #expect(decodes(["Main", "High"], ["Main", "Main10"]) == ["h264/8", "h265/10"])
        #expect(decodes(["High"], ["Main"]) == ["h264/8", "h265/8"])
        #expect(decodes([], ["Main10", "Main422_10"]) == ["h265/10"])
        #expect(decodes(["High"], ["Main444", "Main12"]) == ["h264/8"])
        #expect(decodes([], []).isEmpty)
        let hevcOnly = RenderNodeReport(path: "/dev/dri/renderD128", hevcProfiles: ["Main"])
        #expect(hevcOnly.usable, "a node that decodes only H.265 is usable")
        var broken = hevcOnly
        broken.error = "vaInitialize: unknown libva error"
        #expect(!broken.usable && broken.capabilities.isEmpty)
        #expect(HardwareCapability.vaapiHEVC(profiles: ["Main10"])?.chromaFormats == [1])
    }

    // MARK: - CUDA

    /// No libcuda (every CI machine): no devices and the reason, never a crash.
    @Test func cudaWithoutTheDriverLibrary() throws {
        let cuda = HardwareProbe.probeCUDA(library: "libframetap-no-such-cuda.so.1")
        #expect(cuda.devices.isEmpty && cuda.driverVersion == nil)
        #expect(cuda.error?.hasPrefix("cannot load the NVIDIA driver (libframetap-no-such-cuda.so.1") == true)

        let report = HardwareProbe.probe(renderNodes: [], cuda: cuda)
        #expect(report.cudaDevices.isEmpty && report.cuda == cuda)
    }

    /// The default probe on this machine: consistent whatever it has.
    @Test func cudaOnThisMachine() {
        let report = HardwareProbe.probe(renderNodes: [])
        #expect(report.cudaDevices.isEmpty == (report.cuda.error != nil))
        if !FileManager.default.fileExists(atPath: "/dev/nvidiactl") {
            #expect(report.cudaDevices.isEmpty)
        }
    }

    /// Opening through a pool says which devices opened and why the others did not; the pool
    /// keeps the opened ones for the first sessions.
    @Test func cudaDevicesOpenedThroughAPool() {
        let platform = PretendPlatform(cuda: [0, 1], failing: [.cuda(1): "CUDA_ERROR_DEVICES_UNAVAILABLE (46)"])
        let pool = HardwareDevicePool(platform: platform, clock: SystemClock())
        let cuda = CUDAReport(
            driverVersion: "12.8", error: nil,
            devices: [CUDADeviceReport(device: .cuda(0), index: 0), CUDADeviceReport(device: .cuda(1), index: 1)])
        let report = HardwareProbe.probe(renderNodes: [], cuda: cuda, openingWith: pool)
        #expect(report.cudaDevices.map(\.opened) == [true, false])
        #expect(report.cudaDevices.map(\.usable) == [true, false])
        #expect(report.cudaDevices[1].error?.contains("CUDA_ERROR_DEVICES_UNAVAILABLE") == true)
        #expect(pool.usage().map(\.state) == [.open, .failed])
        #expect(pool.usage().map(\.sessions) == [0, 0])
    }
}
