import Decoding
import Testing

/// `--hw-devices`: strict parsing, and what each entry expands to.
@Suite(.timeLimit(.minutes(10))) struct HardwareDeviceListTests {
    @Test func goodLists() throws {
        let list = try HardwareDeviceList(parsing: "cuda:0,cuda:1,/dev/dri/renderD128")
        #expect(list.entries == [.device(.cuda(0)), .device(.cuda(1)), .device(.renderNode("/dev/dri/renderD128"))])
        #expect(list.description == "cuda:0,cuda:1,/dev/dri/renderD128")

        #expect(try HardwareDeviceList(parsing: "cuda").entries == [.device(.cuda(0))])
        #expect(try HardwareDeviceList(parsing: "vaapi").entries == [.everyRenderNode])
        #expect(try HardwareDeviceList(parsing: " cuda:2 , vaapi ").entries == [.device(.cuda(2)), .everyRenderNode])
        #expect(try HardwareDeviceList(parsing: "cuda:255").entries == [.device(.cuda(255))])
    }

    @Test(arguments: [
        ("", "empty"),
        ("  ", "empty"),
        ("cuda:0,,cuda:1", "entry 2 is empty"),
        ("cuda:0,", "entry 2 is empty"),
        (",cuda:0", "entry 1 is empty"),
        ("cuda:", "\"cuda:\""),
        ("cuda:-1", "\"cuda:-1\""),
        ("cuda:+1", "\"cuda:+1\""),
        ("cuda:x", "\"cuda:x\""),
        ("cuda:256", "0...255"),
        ("cuda: 1", "\"cuda: 1\""),
        ("CUDA:0", "unknown hardware device \"CUDA:0\""),
        ("gpu0", "unknown hardware device \"gpu0\""),
        ("renderD128", "unknown hardware device \"renderD128\""),
        ("/dev/dri/", "not a render node path"),
        ("cuda:0,cuda:0", "listed twice"),
        ("cuda,cuda:0", "listed twice"),
        ("vaapi,vaapi", "listed twice"),
    ])
    func badListsSayWhatIsWrong(_ text: String, _ expected: String) {
        #expect {
            _ = try HardwareDeviceList(parsing: text)
        } throws: { error in
            guard let error = error as? DecodeError else { return false }
            return error.code == .invalidOptions && error.message.contains(expected)
        }
    }

    @Test func devicesOfOneKindInListOrderWithoutDuplicates() throws {
        let list = try HardwareDeviceList(parsing: "/dev/dri/renderD129,cuda:1,vaapi,cuda:0")
        let nodes = { ["/dev/dri/renderD128", "/dev/dri/renderD129"] }
        #expect(list.devices(of: .cuda, renderNodes: nodes) == [.cuda(1), .cuda(0)])
        #expect(
            list.devices(of: .vaapi, renderNodes: nodes) == [
                .renderNode("/dev/dri/renderD129"), .renderNode("/dev/dri/renderD128"),
            ])
    }

    @Test func deviceNamesAreWhatTheOptionTakes() {
        #expect(HardwareDeviceID.cuda(3).description == "cuda:3")
        #expect(HardwareDeviceID.cuda(3).cudaOrdinal == 3)
        #expect(HardwareDeviceID.renderNode("/dev/dri/renderD128").description == "/dev/dri/renderD128")
        #expect(HardwareDeviceID.renderNode("/dev/dri/renderD128").cudaOrdinal == nil)
    }
}
