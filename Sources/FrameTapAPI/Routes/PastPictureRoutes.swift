import FoundationEssentials
import HTTPServer
import Imaging
import Sessions
import Timekeeping

extension FrameTapAPI {
    /// `GET /sessions/{id}/frame/at.{jpg,yuv,rgb}?t=|seq=`: a picture from the session's
    /// history, with latest.jpg's size, quality and format options and headers. The decode
    /// runs on a catch-up decoder, never here: the answer is deferred.
    func pastPicture(_ request: HTTPRequest, format: PictureFormat) throws(HTTPError) -> HTTPResponse {
        let query = QueryReader(request)
        let pictureRequest = try Self.pictureRequest(query, format: format)
        let target = try Self.pastPictureTarget(query)
        let ifNoneMatch = request.ifNoneMatch
        let clientHas = PictureAnswerCondition(
            entityTags: ifNoneMatch?.entityTags ?? [], anyEntityTag: ifNoneMatch?.matchesAny ?? false)
        let session = try session(for: request)
        let handoff = AnswerHandoff()
        session.requestPastPicture(pictureRequest, at: target, clientHas: clientHas) { [clock = session.clock] result in
            handoff.complete(PictureResponses.answer(result, now: clock.uptime))
        }
        return handoff.response()
    }

    /// `GET /sessions/{id}/history`.
    func history(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        var response = HTTPResponse.json(WireJSON.bytes(HistoryJSON(try session(for: request).historySummary())))
        response.headers.add("Cache-Control", "no-store")
        return response
    }

    /// Exactly one of `t` (an RFC 3339 time, or milliseconds since 1970), `seq` and `pts`.
    static func pastPictureTarget(_ query: QueryReader) throws(HTTPError) -> PastPictureTarget {
        let number = try query.unsigned("seq")
        let time = try query.text("t")
        let presentationTime = try query.text("pts")
        guard [number != nil, time != nil, presentationTime != nil].filter({ $0 }).count <= 1 else {
            throw .invalidParameter("t, seq and pts name a picture each: give one of them")
        }
        if let text = presentationTime {
            guard let pts = Int64(text) else {
                throw .invalidParameter("pts must be an integer (an X-Frame-PTS, in 1/90,000 s), got '\(text)'")
            }
            return .presentationTime(pts)
        }
        if let number { return .number(number) }
        guard let text = time else {
            throw .invalidParameter("say which picture: t (a time), seq (a picture number) or pts (its X-Frame-PTS)")
        }
        guard let date = parseTime(text) else {
            throw .invalidParameter("t must be an RFC 3339 time (2026-01-01T12:00:00.250Z) or milliseconds since 1970, got '\(text)'")
        }
        // Seconds since 1970 (2001 to 5138) read as milliseconds name a day of 1970 to 1973,
        // which no history holds: the caller meant seconds.
        if let number = Int64(text), (1_000_000_000..<100_000_000_000).contains(number) {
            let read = UTCTime(millisecondsSince1970: number).iso8601
            throw .invalidParameter(
                "t=\(text) reads as milliseconds since 1970 (\(read)); for seconds since 1970 give t=\(text)000, "
                    + "or an RFC 3339 time")
        }
        return .time(date)
    }

    /// RFC 3339 with or without fractional seconds (a `+` offset that a form encoding turned
    /// into a space is read back; a space between the date and the time, which RFC 3339 allows
    /// in place of `T`, too), or an integer of milliseconds since 1970.
    static func parseTime(_ text: String) -> Date? {
        if let milliseconds = Int64(text), milliseconds >= 0 {
            return Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        }
        var restored = String(text.map { $0 == " " ? "+" : $0 }).uppercased()
        guard calendarDateExists(restored.utf8.prefix(10)) else { return nil }
        let separator = restored.index(restored.startIndex, offsetBy: 10, limitedBy: restored.endIndex)
        if let separator, separator < restored.endIndex, restored[separator] == "+" {
            restored.replaceSubrange(separator...separator, with: "T")
        }
        // RFC 3339 takes any number of fraction digits; a picture is found to the millisecond,
        // and Foundation's style reads a few digits only.
        if let dot = restored.firstIndex(of: "."), restored[..<dot].contains("T") {
            let digits = restored[restored.index(after: dot)...].prefix { $0.isASCII && $0.isNumber }
            if digits.count > 3 { restored.removeSubrange(digits.index(digits.startIndex, offsetBy: 3)..<digits.endIndex) }
        }
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(restored) { return date }
        return try? Date.ISO8601FormatStyle().parse(restored)
    }

    /// Whether `YYYY-MM-DD` names a day of the (proleptic Gregorian) calendar: Foundation's style
    /// takes 2026-02-30 as March the 2nd.
    static func calendarDateExists(_ text: Substring.UTF8View.SubSequence) -> Bool {
        let bytes = Array(text)
        guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-") else { return false }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), (1...12).contains(month) else {
            return false
        }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        return (1...days).contains(day)
    }
}
