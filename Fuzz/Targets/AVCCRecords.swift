// libFuzzer target: the AVCC side of the H264 module, over any bytes taken as an avcC record
// (AVCDecoderConfigurationRecord) and as length-prefixed NAL units with 1-, 2- and 4-byte
// lengths. Whatever parses must round-trip, and the parameter sets inside a record must be
// safe to parse too.

import H264

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAVCCRecords(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)

    if let record = try? AVCDecoderConfigurationRecord(parsing: input) {
        require([1, 2, 4].contains(record.lengthSize), "lengthSize is 1, 2 or 4")
        let serialized = record.serialized()
        require(
            (try? AVCDecoderConfigurationRecord(parsing: serialized)) == record,
            "a parsed avcC record survives serialization")
        require(serialized.count <= input.count, "serialization adds nothing that was not read")
        var sets = ParameterSets()
        for unit in record.spsUnits + record.ppsUnits { _ = try? sets.update(with: unit) }
        if let rebuilt = try? AVCDecoderConfigurationRecord(
            sps: record.spsUnits, pps: record.ppsUnits, lengthSize: record.lengthSize)
        {
            require(
                (try? AVCDecoderConfigurationRecord(parsing: rebuilt.serialized())) == rebuilt,
                "a record built from parameter sets survives serialization")
        }
    }

    for lengthSize in [1, 2, 4] {
        guard let units = try? AVCC.nalUnits(fromLengthPrefixed: input, lengthSize: lengthSize) else { continue }
        require(
            units.reduce(0) { $0 + lengthSize + $1.bytes.count } == input.count,
            "length-prefixed units account for every byte")
        let reencoded = AVCC.lengthPrefixed(units)
        if lengthSize == 4 { require(reencoded == input, "4-byte length-prefixed units re-encode to the input") }
        require(
            (try? AVCC.nalUnits(fromLengthPrefixed: reencoded))?.map(\.bytes) == units.map(\.bytes),
            "length-prefixed units round-trip")
        let annexB = AccessUnit(nalUnits: units).annexB()
        require(annexB.count == input.count + units.count * (4 - lengthSize), "Annex B adds one start code per unit")
    }
    return 0
}
