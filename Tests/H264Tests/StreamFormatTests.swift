import Foundation
import Testing
@testable import H264
import TestSupport
import VideoCoding

@Suite(.timeLimit(.minutes(10))) struct StreamFormatTests {
    @Test func describesAnSPS() throws {
        let vui: (inout BitWriter) -> Void = { w in
            w.flag(true)
            w.u(8, 1)
            w.flag(false)
            w.flag(true)
            w.u(3, 5)
            w.flag(false)
            w.flag(true)
            w.u(8, 1)
            w.u(8, 1)
            w.u(8, 1)
            w.flag(false)
            w.flag(true)
            w.u(32, 1)
            w.u(32, 60)
            w.flag(true)
            for _ in 0..<4 { w.flag(false) }
        }
        let builder = SPSBuilder(
            profileIdc: 66, constraintFlags: 0xC0, levelIdc: 31, widthInMbs: 80, heightInMapUnits: 45, crop: (1, 1, 2, 0), vui: vui)
        let format = StreamFormat(sps: try builder.parsed())
        #expect(format.width == 1276 && format.height == 716)
        #expect(format.codedWidth == 1280 && format.codedHeight == 720)
        #expect(format.crop == .init(left: 2, right: 2, top: 4, bottom: 0))
        #expect(format.profile == "Constrained Baseline" && format.profileIdc == 66 && format.level == "3.1")
        #expect(format.chromaFormat == "4:2:0" && format.bitDepth == 8 && !format.interlaced)
        #expect(format.frameRate == 30)
        #expect(format.sampleAspectRatio == "1:1")
        #expect(format.colorPrimaries == "bt709" && format.transfer == "bt709" && format.matrix == "bt709")
        #expect(!format.fullRange)
    }

    @Test func withoutVUIEverythingIsUnspecified() throws {
        let format = StreamFormat(sps: try SPSBuilder().parsed())
        #expect(format.frameRate == nil && format.sampleAspectRatio == nil)
        #expect(format.colorPrimaries == "unspecified" && format.transfer == "unspecified" && format.matrix == "unspecified")
    }
}
