import Decoding
import Foundation
import HardwareTestSupport
import Testing

/// HardwareProbe without a GPU: every failure is a clean per-node error, never a crash or a
/// libva message on stderr.
@Suite struct HardwareProbeTests {
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
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(report)) as? [String: Any]
        let first = (json?["renderNodes"] as? [[String: Any]])?.first
        #expect(Set(first?.keys.map { $0 } ?? []) == ["path", "vendor", "vaapiVersion", "h264Profiles", "usable", "error"])
        #expect(first?["vendor"] is NSNull)
        #expect(first?["usable"] as? Bool == false)
    }

    // MARK: - CUDA

    /// No libcuda (every CI machine): no devices and the reason, never a crash.
    @Test func cudaWithoutTheDriverLibrary() throws {
        let cuda = HardwareProbe.probeCUDA(library: "libframetap-no-such-cuda.so.1")
        #expect(cuda.devices.isEmpty && cuda.driverVersion == nil)
        #expect(cuda.error?.hasPrefix("cannot load the NVIDIA driver (libframetap-no-such-cuda.so.1") == true)

        let report = HardwareProbe.probe(renderNodes: [], cuda: cuda)
        #expect(report.cudaDevices.isEmpty && report.cuda == cuda)
        let json = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(cuda)) as? [String: Any])
        #expect(Set(json.keys) == ["libavcodecNVDEC", "driverVersion", "error", "devices"])
        #expect(json["driverVersion"] is NSNull && json["libavcodecNVDEC"] is Bool)
        #expect((json["devices"] as? [Any])?.isEmpty == true)
        #expect((json["error"] as? String)?.contains("libframetap-no-such-cuda.so.1") == true)
    }

    /// GET /system's `hardware` object is a published contract: the VA-API report as it was,
    /// and the CUDA report beside it.
    @Test func theHardwareReportHasItsShape() throws {
        let cuda = CUDAReport(driverVersion: "12.8", error: nil, devices: [CUDADeviceReport(device: .cuda(0), index: 0)])
        let report = HardwareProbe.probe(renderNodes: [], cuda: cuda)
        let json = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(report)) as? [String: Any])
        #expect(Set(json.keys) == ["libavcodecVersion", "libavcodecVAAPI", "vaapiHeaderVersion", "renderNodes", "cuda"])
        let cudaJSON = try #require(json["cuda"] as? [String: Any])
        #expect(Set(cudaJSON.keys) == ["libavcodecNVDEC", "driverVersion", "error", "devices"])
        #expect(report.cudaDevices.count == 1)
    }

    /// The default probe on this machine: consistent whatever it has.
    @Test func cudaOnThisMachine() {
        let report = HardwareProbe.probe(renderNodes: [])
        #expect(report.cudaDevices.isEmpty == (report.cuda.error != nil))
        if !FileManager.default.fileExists(atPath: "/dev/nvidiactl") {
            #expect(report.cudaDevices.isEmpty)
        }
    }

    @Test func cudaDeviceShapeHasExplicitNulls() throws {
        let cuda = CUDAReport(
            driverVersion: "12.8", error: nil,
            devices: [
                CUDADeviceReport(device: .cuda(0), index: 0, name: "Pretend GPU", totalMemoryBytes: 80 << 30),
                CUDADeviceReport(device: .cuda(1), index: 1),
            ])
        let json = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(cuda)) as? [String: Any])
        #expect(json["driverVersion"] as? String == "12.8" && json["error"] is NSNull)
        let devices = try #require(json["devices"] as? [[String: Any]])
        for device in devices {
            #expect(Set(device.keys) == ["device", "index", "name", "totalMemoryBytes", "opened", "usable", "error"])
        }
        #expect(devices[0]["device"] as? String == "cuda:0" && devices[0]["name"] as? String == "Pretend GPU")
        #expect(devices[0]["totalMemoryBytes"] as? Int == 80 << 30 && devices[0]["usable"] as? Bool == true)
        #expect(devices[1]["name"] is NSNull && devices[1]["opened"] is NSNull && devices[1]["error"] is NSNull)
    }

    /// Opening through a pool says which devices opened and why the others did not; the pool
    /// keeps the opened ones for the first sessions.
    @Test func cudaDevicesOpenedThroughAPool() {
        let platform = PretendPlatform(cuda: [0, 1], failing: [.cuda(1): "CUDA_ERROR_DEVICES_UNAVAILABLE (46)"])
        let pool = HardwareDevicePool(platform: platform)
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
