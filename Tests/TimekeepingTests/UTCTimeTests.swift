import Foundation
import Testing
import Timekeeping

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.timeLimit(.minutes(10))) struct UTCTimeTests {
    /// Every field agrees with the C library's `gmtime_r` across four centuries, leap days and
    /// century years included, and before the epoch.
    @Test func fieldsAgreeWithTheCLibrary() {
        var generator = SystemRandomNumberGenerator()
        let fixed: [Int64] = [
            0, -1, 86_399_999, 86_400_000, 951_782_400_000, 951_868_799_999, 4_107_542_400_000, 253_402_300_799_999,
            -2_208_988_800_000,
        ]
        let random = (0..<20_000).map { _ in Int64.random(in: -2_208_988_800_000...4_102_444_800_000, using: &generator) }
        for milliseconds in fixed + random {
            let time = UTCTime(millisecondsSince1970: milliseconds)
            var seconds = time_t(milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000)
            var parts = tm()
            gmtime_r(&seconds, &parts)
            let expected = [
                Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday), Int(parts.tm_hour),
                Int(parts.tm_min), Int(parts.tm_sec), Int(parts.tm_wday),
            ]
            let fields = [time.year, time.month, time.day, time.hour, time.minute, time.second, time.weekday]
            #expect(fields == expected, "\(milliseconds) ms")
            let millisecond = Int(((milliseconds % 1000) + 1000) % 1000)
            #expect(time.millisecond == millisecond, "\(milliseconds) ms")
        }
    }

    /// RFC 3339 reads back what `iso8601` writes, across four centuries and before the epoch,
    /// and an offset moves the instant by exactly its hours and minutes.
    @Test func rfc3339ReadsBackWhatIsWritten() {
        var generator = SystemRandomNumberGenerator()
        let fixed: [Int64] = [0, -1, 951_782_400_000, 951_868_799_999, 253_402_300_799_999, -2_208_988_800_000]
        let random = (0..<20_000).map { _ in Int64.random(in: -2_208_988_800_000...4_102_444_800_000, using: &generator) }
        for milliseconds in fixed + random {
            let written = UTCTime(millisecondsSince1970: milliseconds).iso8601
            #expect(UTCTime.millisecondsSince1970(rfc3339: written) == milliseconds, "\(written)")
            let shifted = written.dropLast() + "-23:59"
            #expect(UTCTime.millisecondsSince1970(rfc3339: shifted) == milliseconds + (23 * 60 + 59) * 60_000, "\(shifted)")
        }
    }

    /// The millisecond below, counted from the reference date as `Date` holds it: the 1970-based
    /// interval of the first two dates rounds up to .125 and to the next day.
    @Test func aDateIsTakenToTheMillisecondBelowIt() {
        func fields(_ date: Date) -> [Int] {
            let time = UTCTime(date)
            return [time.year, time.month, time.day, time.hour, time.minute, time.second, time.millisecond]
        }
        #expect(fields(Date(timeIntervalSinceReferenceDate: 788_918_400.125 - 0x1p-23)) == [2026, 1, 1, 0, 0, 0, 124])
        #expect(fields(Date(timeIntervalSinceReferenceDate: 788_918_400 - 0x1p-23)) == [2025, 12, 31, 23, 59, 59, 999])
        #expect(fields(Date(timeIntervalSince1970: 1_767_225_600.1259)) == [2026, 1, 1, 0, 0, 0, 125])
        #expect(fields(Date(timeIntervalSince1970: -0.0005)) == [1969, 12, 31, 23, 59, 59, 999])
    }

    @Test func asciiIsPaddedAndCutToItsCapacity() {
        let padded = String(asciiCapacity: 16) { text in
            text.append(7, digits: 3)
            text.append("-")
            text.append(12345, digits: 2)
            text.append("-")
            text.append(-4, digits: 2)
        }
        #expect(padded == "007-12345-00")
        let cut = String(asciiCapacity: 5) { text in
            text.append("abc")
            text.append(123_456, digits: 1)
            text.append("z")
        }
        #expect(cut == "abc12")
        let widest = String(asciiCapacity: 24) { $0.append(Int.max, digits: 1) }
        #expect(widest == String(Int.max))
    }
}
