import Decoding
import Foundation
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
}
