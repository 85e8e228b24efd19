// frametap-bench: the micro-benchmarks of `make bench` (M1, M2), each beside its peer measured
// in the same process on the same bytes. Prints one JSON object per line; bench/bench.py runs it.
//
//   frametap-bench splitter FILE [--rounds N] [--copies C]   M1: AnnexBSplitter vs a memchr scanner
//   frametap-bench jpeg FILE [--quality Q] [--rounds N]       M2: the standard encoder's JPEG of the first picture
import Decoding
import Foundation
import H264
import Imaging
import VideoCoding

#if canImport(Glibc)
    import Glibc
#endif

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("frametap-bench: \(message)\n".utf8))
    exit(2)
}

func option(_ name: String, _ fallback: Int) -> Int {
    let args = CommandLine.arguments
    guard let index = args.firstIndex(of: name), index + 1 < args.count else { return fallback }
    guard let value = Int(args[index + 1]), value > 0 else { fail("\(name) needs a positive integer") }
    return value
}

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

func emit(_ object: [String: Any]) {
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    print(String(decoding: data, as: UTF8.self))
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// Start codes (00 00 01) found with memchr for each zero byte: the usual C way to scan Annex B.
func memchrStartCodes(_ p: UnsafePointer<UInt8>, _ count: Int) -> Int {
    var found = 0
    var index = 0
    while index + 2 < count {
        guard let hit = memchr(p + index, 0, count - index - 2) else { break }
        let at = UnsafePointer<UInt8>(hit.assumingMemoryBound(to: UInt8.self)) - p
        if p[at + 1] == 0 && p[at + 2] == 1 {
            found += 1
            index = at + 3
        } else {
            index = at + 1
        }
    }
    return found
}

func splitterBenchmark(_ path: String) {
    guard let file = FileManager.default.contents(atPath: path) else { fail("cannot read \(path)") }
    // Several copies back to back, so one pass is well above the timer's resolution and the
    // buffer is far bigger than the caches, as for a stream arriving from the network.
    let copies = option("--copies", 8)
    var buffer = [UInt8]()
    buffer.reserveCapacity(file.count * copies)
    for _ in 0..<copies { buffer.append(contentsOf: file) }
    let rounds = option("--rounds", 7)
    let chunk = option("--chunk", 64 << 10)

    var splitterRates: [Double] = []
    var memchrRates: [Double] = []
    var units = 0
    var startCodes = 0
    buffer.withUnsafeBytes { raw in
        let p = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
        for _ in 0..<rounds {
            // FrameTap: pushed in network-sized pieces, every unit copied out as a NALUnit.
            var splitter = AnnexBSplitter()
            var count = 0
            var payload = 0
            let start = now()
            var offset = 0
            while offset < raw.count {
                let end = min(offset + chunk, raw.count)
                splitter.push(UnsafeRawBufferPointer(rebasing: raw[offset..<end])) { event in
                    if case .unit(let unit) = event {
                        count += 1
                        payload &+= NALUnit(unit).bytes.count
                    }
                }
                offset = end
            }
            splitter.finish { event in
                if case .unit = event { count += 1 }
            }
            let elapsed = now() - start
            units = count
            splitterRates.append(Double(raw.count) / Double(elapsed))  // bytes/ns = GB/s

            let startM = now()
            startCodes = memchrStartCodes(p, raw.count)
            memchrRates.append(Double(raw.count) / Double(now() - startM))

        }
    }
    guard units == startCodes else {
        fail("splitter found \(units) NAL units but memchr found \(startCodes) start codes")
    }
    emit([
        "id": "M1", "bytes": buffer.count, "chunk": chunk, "rounds": rounds, "nalUnits": units,
        "splitterGBps": median(splitterRates), "memchrStartCodesGBps": median(memchrRates),
        "splitterRuns": splitterRates, "memchrRuns": memchrRates,
    ])
}

func jpegBenchmark(_ path: String) {
    guard let file = FileManager.default.contents(atPath: path) else { fail("cannot read \(path)") }
    let bytes = [UInt8](file)
    // The first picture of the stream, decoded once; every round encodes those same planes.
    let decoder: StreamDecoder
    do {
        decoder = try StreamDecoder(options: .lowLatency(backend: .software))
    } catch {
        fail("decoder: \(error)")
    }
    var output = decoder.push(Array(bytes.prefix(2 << 20)))
    if output.frames.isEmpty { output.frames += decoder.finish().frames }
    guard let frame = output.frames.first else { fail("no picture decoded from \(path)") }
    let quality = option("--quality", 85)
    let rounds = option("--rounds", 7)
    let perRound = option("--encodes", 60)
    let encoder: any PictureEncoding
    do {
        encoder = try PictureEncoders.standard().makeEncoder()
    } catch {
        fail("encoder: \(error)")
    }
    var times: [Double] = []
    var size = 0
    do {
        for _ in 0..<3 { _ = try encoder.encode(frame, PictureOptions(format: .jpeg, quality: quality)) }
        for _ in 0..<rounds {
            let start = now()
            for _ in 0..<perRound {
                size = try encoder.encode(frame, PictureOptions(format: .jpeg, quality: quality)).count
            }
            times.append(Double(now() - start) / Double(perRound) / 1e6)
        }
    } catch {
        fail("encode: \(error)")
    }
    emit([
        "id": "M2", "encoder": encoder.identity.name, "width": frame.width, "height": frame.height, "quality": quality, "jpegBytes": size,
        "msPerPicture": median(times), "picturesPerSecond": 1000 / median(times), "runsMs": times,
        "megapixelsPerSecond": Double(frame.width * frame.height) / median(times) / 1000,
    ])
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    fail("usage: frametap-bench splitter|jpeg FILE [options]")
}
switch arguments[1] {
case "splitter": splitterBenchmark(arguments[2])
case "jpeg": jpegBenchmark(arguments[2])
default: fail("unknown benchmark '\(arguments[1])'")
}
