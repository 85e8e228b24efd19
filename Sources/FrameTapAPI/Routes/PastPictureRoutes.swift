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

    /// RFC 3339 (`UTCTime.millisecondsSince1970(rfc3339:)`), or an integer of milliseconds since
    /// 1970.
    static func parseTime(_ text: String) -> Date? {
        if let milliseconds = Int64(text), milliseconds >= 0 {
            return Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        }
        return UTCTime.millisecondsSince1970(rfc3339: text).map { Date(timeIntervalSince1970: Double($0) / 1000) }
    }
}
