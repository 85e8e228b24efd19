import FoundationEssentials

/// A wall-clock instant in UTC, in its calendar fields (proleptic Gregorian), for the timestamps
/// FrameTap writes on every answer: HTTP dates and ISO 8601 with milliseconds. Plain arithmetic on
/// the Unix time: no time zone database, no lock (glibc's `gmtime_r` takes its time zone lock) and
/// no Calendar (Foundation's ISO 8601 style builds date components through one).
public struct UTCTime: Sendable, Equatable {
    public let year: Int
    /// 1 to 12.
    public let month: Int
    /// 1 to 31.
    public let day: Int
    public let hour: Int
    public let minute: Int
    public let second: Int
    public let millisecond: Int
    /// 0 for Sunday to 6 for Saturday.
    public let weekday: Int

    /// The millisecond `milliseconds` after the Unix epoch (before it when negative).
    public init(millisecondsSince1970 milliseconds: Int64) {
        let (days, millisecondOfDay) = Self.floorDivision(milliseconds, 86_400_000)
        let secondOfDay = Int(millisecondOfDay / 1000)
        millisecond = Int(millisecondOfDay % 1000)
        hour = secondOfDay / 3600
        minute = secondOfDay / 60 % 60
        second = secondOfDay % 60
        weekday = Int(Self.floorDivision(days + 4, 7).remainder)  // 1970-01-01 was a Thursday
        // Days to a civil date, counting in 400-year eras from 0000-03-01 so that each leap day
        // ends its year (H. Hinnant, "chrono-Compatible Low-Level Date Algorithms").
        let shifted = days + 719_468
        let (era, dayOfEra) = Self.floorDivision(shifted, 146_097)
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        day = Int(dayOfYear - (153 * monthFromMarch + 2) / 5 + 1)
        month = Int(monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9)
        year = Int(yearOfEra + era * 400) + (month <= 2 ? 1 : 0)
    }

    /// `date`, to the millisecond below it. Counted from the reference date (2001), as `Date`
    /// holds it: its 1970-based interval has one bit less and can round up into the next
    /// millisecond, where Foundation's ISO 8601 style does not.
    public init(_ date: Date) {
        let sinceReference = date.timeIntervalSinceReferenceDate
        let seconds = sinceReference.rounded(.down)
        let millisecond = min(Int64(((sinceReference - seconds) * 1000).rounded(.down)), 999)
        self.init(millisecondsSince1970: (Int64(seconds) + Self.referenceDateSince1970) * 1000 + millisecond)
    }

    /// Seconds from 1970-01-01 to 2001-01-01.
    private static let referenceDateSince1970: Int64 = 978_307_200

    /// The whole second `seconds` after the Unix epoch.
    public init(secondsSince1970 seconds: Int) {
        self.init(millisecondsSince1970: Int64(seconds) * 1000)
    }

    /// Milliseconds since 1970 of an RFC 3339 date-time (`2026-11-29T13:00:00.250+01:00`), to the
    /// millisecond below it; nil for anything else, a day the calendar lacks included. Any
    /// number of fraction digits; `t`, `z` and a space between date and time as RFC 3339 allows;
    /// offsets up to ±23:59, and also without their colon or in hours only (ISO 8601's `+01`,
    /// as PostgreSQL writes them). A space where the offset's sign belongs is a `+` that a form
    /// encoding turned into one.
    public static func millisecondsSince1970(rfc3339 text: some StringProtocol) -> Int64? {
        var reader = DigitReader(Array(text.utf8))
        guard let year = reader.number(digits: 4), reader.take("-"), let month = reader.number(digits: 2), reader.take("-"),
            let day = reader.number(digits: 2), (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
            reader.take("T") || reader.take("t") || reader.take(" "),
            let hour = reader.number(digits: 2), reader.take(":"), let minute = reader.number(digits: 2), reader.take(":"),
            let second = reader.number(digits: 2), hour < 24, minute < 60, second <= 60
        else { return nil }
        var millisecond = 0
        if reader.take(".") {
            var digits = 0
            while let digit = reader.number(digits: 1) {
                if digits < 3 { millisecond = millisecond * 10 + digit }
                digits += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<max(digits, 3) { millisecond *= 10 }
        }
        var offsetMinutes = 0
        if !(reader.take("Z") || reader.take("z")) {
            let sign: Int
            if reader.take("+") || reader.take(" ") {
                sign = 1
            } else if reader.take("-") {
                sign = -1
            } else {
                return nil
            }
            guard let hours = reader.number(digits: 2) else { return nil }
            let colon = reader.take(":")
            let minutes = reader.number(digits: 2)
            guard hours < 24, minutes ?? 0 < 60, !colon || minutes != nil else { return nil }
            offsetMinutes = sign * (hours * 60 + (minutes ?? 0))
        }
        guard reader.atEnd else { return nil }
        let days = daysSince1970(year: year, month: month, day: day)
        let seconds = ((days * 24 + Int64(hour)) * 60 + Int64(minute) - Int64(offsetMinutes)) * 60 + Int64(second)
        return seconds * 1000 + Int64(millisecond)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    }

    /// A civil date's days since 1970-01-01: the inverse of the count in `init`, in the same eras.
    private static func daysSince1970(year: Int, month: Int, day: Int) -> Int64 {
        let year = Int64(month <= 2 ? year - 1 : year)
        let (era, yearOfEra) = floorDivision(year, 400)
        let monthFromMarch = Int64(month > 2 ? month - 3 : month + 9)
        let dayOfYear = (153 * monthFromMarch + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// Reads ASCII digits and punctuation left to right.
    private struct DigitReader {
        let bytes: [UInt8]
        var offset = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { offset == bytes.count }

        mutating func take(_ character: Unicode.Scalar) -> Bool {
            guard offset < bytes.count, bytes[offset] == UInt8(ascii: character) else { return false }
            offset += 1
            return true
        }

        /// Exactly `digits` decimal digits, or nil (and nothing taken).
        mutating func number(digits: Int) -> Int? {
            guard offset + digits <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[offset..<offset + digits] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            offset += digits
            return value
        }
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }
}

/// Writes timestamps as ASCII into a buffer of known size, so each is one allocation. What does
/// not fit is cut off.
public struct ASCIIWriter: ~Copyable {
    private let buffer: UnsafeMutableBufferPointer<UInt8>
    public private(set) var count = 0

    public init(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        self.buffer = buffer
    }

    public mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { bytes in
            for byte in bytes where count < buffer.count {
                buffer[count] = byte
                count += 1
            }
        }
    }

    /// `value` in decimal with at least `digits` digits (zero-padded); a negative value is written
    /// as 0.
    public mutating func append(_ value: Int, digits: Int) {
        let value = max(value, 0)
        var width = 1
        var shorter = value / 10
        while shorter > 0 {
            width += 1
            shorter /= 10
        }
        width = max(width, digits)
        var rest = value
        // What does not fit is the lowest digits.
        for _ in 0..<max(0, width - (buffer.count - count)) {
            rest /= 10
            width -= 1
        }
        for position in stride(from: count + width - 1, through: count, by: -1) {
            buffer[position] = UInt8(truncatingIfNeeded: 48 + rest % 10)
            rest /= 10
        }
        count += width
    }
}

extension ASCIIWriter {
    /// `HH:MM:SS`, as HTTP dates and ISO 8601 both write the time of day.
    public mutating func appendTimeOfDay(_ time: UTCTime) {
        append(time.hour, digits: 2)
        append(":")
        append(time.minute, digits: 2)
        append(":")
        append(time.second, digits: 2)
    }
}

extension UTCTime {
    /// ISO 8601 in UTC with milliseconds (`2026-01-01T00:00:00.125Z`): the timestamps of answers,
    /// events and the JSON log.
    public var iso8601: String {
        String(asciiCapacity: 32) { text in
            text.append(year, digits: 4)
            text.append("-")
            text.append(month, digits: 2)
            text.append("-")
            text.append(day, digits: 2)
            text.append("T")
            text.appendTimeOfDay(self)
            text.append(".")
            text.append(millisecond, digits: 3)
            text.append("Z")
        }
    }
}

extension String {
    /// A string of at most `capacity` ASCII bytes, written by `write`.
    public init(asciiCapacity capacity: Int, _ write: (inout ASCIIWriter) -> Void) {
        self.init(unsafeUninitializedCapacity: capacity) { buffer in
            var writer = ASCIIWriter(buffer)
            write(&writer)
            return writer.count
        }
    }
}
