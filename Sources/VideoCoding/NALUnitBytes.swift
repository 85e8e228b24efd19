/// A NAL unit's bytes without a start code, whichever model holds them (the splitter's
/// `AnnexBUnit`, each codec's `NALUnit`): what joining units into a byte stream, and telling
/// a repeated parameter set from a changed one, need of them.
public protocol NALUnitBytes: SlabDetachable {
    /// From the NAL unit header on, emulation prevention kept.
    var bytes: SlabBytes { get }
}

/// A value whose bytes lie in slabs, which can copy them out: a unit kept long, or kept where
/// no bound counts the slabs (a stream's parameter sets; units held before a stream can start),
/// would otherwise keep its whole slab alive.
public protocol SlabDetachable {
    /// The same value with its bytes in memory of their own (`SlabBytes.detached`).
    func detached() -> Self
}

extension AnnexBUnit: NALUnitBytes {
    public func detached() -> AnnexBUnit {
        AnnexBUnit(bytes: bytes.detached(), streamOffset: streamOffset)
    }
}

/// A codec's NAL unit type: what a message names it by ("SPS", "IDR_W_RADL").
public protocol NALUnitTypeName: Equatable {
    var name: String { get }
}

/// A codec's NAL unit, its header read: the payload after the header (one byte in H.264, two in
/// H.265) and its RBSP are read the same way in both.
public protocol HeaderedNALUnit: NALUnitBytes {
    associatedtype UnitType: NALUnitTypeName
    var type: UnitType { get }
    /// The escaped bytes after the header (the payload `RBSP.unescape` takes).
    var payload: SlabBytes { get }
}

extension HeaderedNALUnit {
    /// The raw byte sequence payload of the whole unit (after its header).
    @inlinable
    public func rbsp() -> [UInt8] { RBSP.unescape(payload) }

    /// The RBSP of a unit that must be of `type` (a parameter set parsed from a unit of another
    /// type is refused as invalid data); `what` names it in the message, e.g. "an SPS".
    @inlinable
    public func rbsp(of type: UnitType, _ what: String) throws(BitstreamError) -> [UInt8] {
        guard self.type == type else {
            throw BitstreamError(.invalidData, "NAL unit type \(self.type.name) is not \(what)")
        }
        return rbsp()
    }
}

extension Collection where Element: NALUnitBytes {
    /// Payload bytes (NAL units without start codes).
    public var payloadByteCount: Int { reduce(0) { $0 + $1.bytes.count } }

    /// The NAL units joined with four-byte start codes (00 00 00 01).
    public func annexB() -> [UInt8] {
        var output: [UInt8] = []
        appendAnnexB(to: &output)
        return output
    }

    /// Appends the NAL units, each after a four-byte start code, to `output` (a buffer a caller
    /// reuses for every access unit).
    public func appendAnnexB(to output: inout [UInt8]) {
        output.reserveCapacity(output.count + payloadByteCount + 4 * count)
        for unit in self {
            output.append(0)
            output.append(0)
            output.append(0)
            output.append(1)
            unit.bytes.withUnsafeBytes { output.append(contentsOf: $0) }
        }
    }
}

/// An access unit, whichever model holds it (each codec's `AccessUnit`, the codec-neutral
/// `CodedAccessUnit`): its size and its Annex B bytes come from its NAL units alone.
public protocol NALUnitSequence {
    associatedtype Unit: NALUnitBytes
    /// In stream order, without start codes.
    var nalUnits: [Unit] { get }
}

extension NALUnitSequence {
    /// Payload bytes (NAL units without start codes).
    public var byteCount: Int { nalUnits.payloadByteCount }

    /// The NAL units joined with four-byte start codes (00 00 00 01).
    public func annexB() -> [UInt8] { nalUnits.annexB() }
}

extension Dictionary where Key == Int {
    /// Stores a parsed parameter set under its id, and in `units` the NAL unit it came from
    /// (in memory of its own: it is kept for the stream's life, its slab is not); false (and
    /// nothing stored) when the same set from the same bytes is there already, so that a
    /// repeated set is not taken for a change.
    public mutating func storeParameterSet<Unit: NALUnitBytes>(
        _ parsed: Value, id: Int, from unit: Unit, units: inout [Int: Unit]
    ) -> Bool where Value: Equatable {
        if self[id] == parsed && units[id]?.bytes == unit.bytes { return false }
        self[id] = parsed
        units[id] = unit.detached()
        return true
    }
}
