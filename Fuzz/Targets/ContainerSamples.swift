// libFuzzer target: FrameTap's AVIO bridge (the AVIOContext over a byte input with its seek
// window) under libavformat's demuxers, and the bitstream layer's sample conversion.
//
// The first byte chooses what the rest is:
// - bit 2 clear: a container (bits 0-1: MPEG-TS, MP4, Matroska, FLV) delivered in pieces of a
//   size chosen by bits 3-7, read with a 64 KiB seek window; each sample of the video track is
//   converted as StreamDecoder converts it;
// - bit 2 set: a sample description and a sample for `SampleConverter` directly (bit 0: H.265,
//   bit 1: samples are pieces of an Annex B stream; then a 2-byte configuration length, the
//   configuration, and the sample).
// Checked besides "no crash, no leak, no hang": the window never holds more than its capacity
// (and one read), no sample is larger than the input, and a sample's NAL units are never empty
// and never add up to more than the sample.

import Bitstream
import CFFmpeg
import Containers
import Timekeeping
import VideoCoding

/// The window the container mode reads with, and the most one read adds past it (AVIOBridge's buffer).
let seekWindow = 64 << 10
let largestRead = 32 << 10
let pieceSizes = [1, 3, 7, 64, 188, 500, 1000, 4096, 32768, 1 << 20]
let quiet: Void = av_log_set_level(AV_LOG_QUIET)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzContainerSamples(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    _ = quiet
    let input = fuzzInput(data, size)
    guard let mode = input.first else { return 0 }
    let body = Array(input.dropFirst())
    if mode & 4 != 0 {
        convertDirectly(mode: mode, body)
        return 0
    }
    let format = [ContainerFormat.mpegTS, .mp4, .matroska, .flv][Int(mode & 3)]
    let pieceSize = pieceSizes[Int(mode >> 3) % pieceSizes.count]
    let demuxer: Demuxer
    do {
        demuxer = try Demuxer(
            container: format, input: InMemoryInput(body, pieceSize: pieceSize), seekWindow: seekWindow,
            interrupt: DemuxInterrupt(clock: SystemClock()))
    } catch {
        return 0
    }
    var samples = 0
    while samples < 4096, case .sample(let sample) = demuxer.next() {
        samples += 1
        require(demuxer.heldBytes <= seekWindow + largestRead, "the seek window holds at most its capacity and one read")
        require(sample.payload.count <= body.count, "a sample is never larger than the input")
        convert(sample.payload, sample.description)
    }
    return 0
}

func convertDirectly(mode: UInt8, _ body: [UInt8]) {
    guard body.count >= 2 else { return }
    let length = min(body.count - 2, Int(body[0]) << 8 | Int(body[1]))
    let configuration = Array(body[2..<(2 + length)])
    let sample = Array(body[(2 + length)...])
    convert(
        sample,
        SampleDescription(codec: mode & 1 == 0 ? .h264 : .h265, configuration: configuration, samplesAreAccessUnits: mode & 2 == 0))
}

func convert(_ sample: [UInt8], _ description: SampleDescription) {
    guard let converter = try? SampleConverter(description, maxNALBytes: 1 << 20) else { return }
    for unit in converter.parameterSets {
        require(!unit.bytes.isEmpty, "a parameter set unit is never empty")
        require(unit.bytes.count <= description.configuration.count, "a parameter set comes from the configuration")
    }
    guard let units = try? sample.withUnsafeBytes({ try converter.units(of: $0) }) else { return }
    let total = units.reduce(0) { $0 + $1.bytes.count }
    require(units.allSatisfy { !$0.bytes.isEmpty }, "a sample's NAL units are never empty")
    require(total <= sample.count, "a sample's NAL units never add up to more than the sample")
    if let lengthSize = converter.lengthSize {
        require(total + units.count * lengthSize <= sample.count, "each length-prefixed unit's length field is in the sample")
    }
}
