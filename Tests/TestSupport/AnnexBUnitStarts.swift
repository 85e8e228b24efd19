/// Where each NAL unit of an Annex B stream begins: the index right after each 00 00 01 start
/// code (a four-byte start code's leading zero stays with the unit before).
public func annexBUnitStarts(_ stream: [UInt8]) -> [Int] {
    var starts: [Int] = []
    var index = 0
    while index + 2 < stream.count {
        if stream[index] == 0, stream[index + 1] == 0, stream[index + 2] == 1 {
            starts.append(index + 3)
            index += 3
        } else {
            index += 1
        }
    }
    return starts
}
