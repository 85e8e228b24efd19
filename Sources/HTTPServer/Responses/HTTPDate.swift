import Timekeeping

/// RFC 9110 IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), formatted by hand: no locale, no
/// formatter object and one allocation per date.
public enum HTTPDate {
    private static let days: [StaticString] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months: [StaticString] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]

    /// The date `secondsSince1970` seconds after the Unix epoch.
    public static func string(secondsSince1970: Int) -> String {
        let time = UTCTime(secondsSince1970: secondsSince1970)
        return String(asciiCapacity: 40) { text in
            text.append(days[time.weekday])
            text.append(", ")
            text.append(time.day, digits: 2)
            text.append(" ")
            text.append(months[time.month - 1])
            text.append(" ")
            text.append(time.year, digits: 4)
            text.append(" ")
            text.appendTimeOfDay(time)
            text.append(" GMT")
        }
    }
}
