// libFuzzer target: the H.264 syntax parsers (SPS with VUI and HRD, PPS, slice header, SEI and
// recovery point, RBSP escaping) over the NAL units of a small Annex B stream, the way the
// assembler meets them: parameter sets first update a ParameterSets, later slices are read
// against it. Every unit is also parsed as every kind, whatever its header says, so mutations
// of one kind's bytes reach all parsers. The avcC record built from the sets must round-trip.

import H264
import VideoCoding

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzParameterSets(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let units = AnnexBSplitter.split(fuzzInput(data, size)).map(NALUnit.init)
    var sets = ParameterSets()
    for nal in units {
        let rbsp = nal.rbsp()
        checkEscaping(rbsp)
        if let sps = try? SequenceParameterSet(rbsp: rbsp) { checkDerivedValues(sps) }
        for chromaFormatIdc in 0...3 { _ = try? PictureParameterSet(rbsp: rbsp, chromaFormatIdc: chromaFormatIdc) }
        if let messages = try? SEIMessage.messages(inRBSP: rbsp) { checkSEI(messages, rbsp: rbsp) }

        switch nal.type {
        case .sps, .pps:
            let before = (sps: sets.sps, pps: sets.pps)
            do {
                try sets.update(with: nal)
                if nal.type == .sps {
                    let parsed = try SequenceParameterSet(nal: nal)
                    require(sets.sps[parsed.id] == parsed, "an SPS is stored under its id as parsed")
                    require(sets.spsUnits[parsed.id]?.bytes == nal.bytes, "the SPS unit is kept with it")
                } else {
                    // The PPS's own SPS says how long its scaling-matrix tail is.
                    let spsId = try PictureParameterSet(rbsp: rbsp).spsId
                    let parsed = try PictureParameterSet(nal: nal, sps: sets.sps[spsId])
                    require(sets.pps[parsed.id] == parsed, "a PPS is stored under its id as parsed")
                    require(sets.ppsUnits[parsed.id]?.bytes == nal.bytes, "the PPS unit is kept with it")
                }
            } catch {
                require(
                    sets.sps == before.sps && sets.pps == before.pps,
                    "a malformed parameter set leaves the stored ones alone")
            }
        case .slice, .idr, .sliceDataA:
            checkSliceHeader(nal, sets)
        case .sei:
            _ = try? SEIMessage.messages(in: nal)
        default:
            require((try? SliceHeaderPrefix.leadingFields(of: nal)) == nil, "only slices have a slice header")
        }
    }
    checkConfigurationRecord(sets)
    return 0
}

func checkEscaping(_ rbsp: [UInt8]) {
    let escaped = RBSP.escape(rbsp)
    require(RBSP.unescape(escaped) == rbsp, "unescape(escape(rbsp)) == rbsp")
    // Escaped payload never holds 00 00 00, 00 00 01 or 00 00 02 (§7.4.1), so no start code.
    var zeros = 0
    for byte in escaped {
        require(!(zeros >= 2 && byte <= 2), "escaped RBSP holds no 00 00 00, 00 00 01 or 00 00 02")
        zeros = byte == 0 ? zeros + 1 : 0
    }
}

func checkDerivedValues(_ sps: SequenceParameterSet) {
    let crop = sps.cropRect
    require(
        crop.x >= 0 && crop.y >= 0 && crop.width > 0 && crop.height > 0 && crop.x + crop.width <= sps.codedWidth
            && crop.y + crop.height <= sps.codedHeight,
        "the crop rectangle \(crop) lies inside the \(sps.codedWidth)x\(sps.codedHeight) coded picture")
    let format = StreamFormat(sps: sps)
    require(
        format.width == crop.width && format.height == crop.height && format.crop.left >= 0
            && format.crop.right >= 0 && format.crop.top >= 0 && format.crop.bottom >= 0,
        "StreamFormat repeats the crop rectangle")
    require(!sps.profileName.isEmpty && !sps.levelName.isEmpty, "every profile and level has a name")
    if let rate = sps.vui?.frameRate { require(rate.isFinite && rate > 0, "a frame rate is positive and finite") }
    _ = sps.vui?.nalHRD?.bitRate
    _ = sps.vui?.vclHRD?.bitRate
    _ = sps.announcesReorderDelay
}

func checkSEI(_ messages: [SEIMessage], rbsp: [UInt8]) {
    require(
        messages.reduce(0) { $0 + $1.payload.count } <= rbsp.count,
        "SEI payloads are parts of the RBSP")
    for message in messages where message.payloadType == SEIMessage.recoveryPointType {
        if let point = try? RecoveryPoint(payload: message.payload) {
            require((0...65535).contains(point.recoveryFrameCount), "recovery_frame_cnt stays in range")
        }
    }
}

func checkSliceHeader(_ nal: NALUnit, _ sets: ParameterSets) {
    let leading = try? SliceHeaderPrefix.leadingFields(of: nal)
    guard let header = try? SliceHeaderPrefix(nal: nal, parameterSets: sets) else { return }
    require(
        leading?.firstMbInSlice == header.firstMbInSlice && leading?.sliceType == header.sliceType
            && leading?.ppsId == header.ppsId,
        "the leading fields are those of the full header")
    require(sets.pps[header.ppsId]?.spsId == header.spsId, "the header names the SPS of its PPS")
    require(!header.startsNewPicture(after: header), "a slice does not start a new picture after itself")
    require(header.isIDR == (nal.type == .idr), "IdrPicFlag follows the NAL type")
    require((header.idrPicId != nil) == header.isIDR, "idr_pic_id is present exactly in IDR slices")
}

func checkConfigurationRecord(_ sets: ParameterSets) {
    let spsUnits = sets.spsUnits.keys.sorted().compactMap { sets.spsUnits[$0] }
    let ppsUnits = sets.ppsUnits.keys.sorted().compactMap { sets.ppsUnits[$0] }
    guard let record = try? AVCDecoderConfigurationRecord(sps: spsUnits, pps: ppsUnits) else { return }
    let bytes = record.serialized()
    guard let parsed = try? AVCDecoderConfigurationRecord(parsing: bytes) else {
        require(false, "a serialized avcC record parses")
        return
    }
    require(parsed == record, "an avcC record survives serialization")
    require(
        parsed.spsUnits.map(\.bytes) == spsUnits.map(\.bytes) && parsed.ppsUnits.map(\.bytes) == ppsUnits.map(\.bytes),
        "the record keeps the parameter set units")

    let prefixed = AVCC.lengthPrefixed(spsUnits + ppsUnits)
    let units = try? AVCC.nalUnits(fromLengthPrefixed: prefixed)
    require(units?.map(\.bytes) == (spsUnits + ppsUnits).map(\.bytes), "length-prefixed units round-trip")
}
