import FoundationEssentials
import HTTPServer
import Imaging
import Sessions

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

    /// Exactly one of `t` (an RFC 3339 time, or milliseconds since 1970) and `seq`.
    static func pastPictureTarget(_ query: QueryReader) throws(HTTPError) -> PastPictureTarget {
        let number = try query.unsigned("seq")
        let time = try query.text("t")
        switch (time, number) {
        case (nil, let number?):
            return .number(number)
        case (let text?, nil):
            guard let date = parseTime(text) else {
                throw .invalidParameter("t must be an RFC 3339 time (2026-01-01T12:00:00.250Z) or milliseconds since 1970, got '\(text)'")
            }
            return .time(date)
        case (nil, nil):
            throw .invalidParameter("say which picture: t (a time) or seq (a picture number)")
        case (_?, _?):
            throw .invalidParameter("t and seq name a picture each: give one of them")
        }
    }

    /// RFC 3339 with or without fractional seconds (a `+` offset that a form encoding turned
    /// into a space is read back), or an integer of milliseconds since 1970.
    static func parseTime(_ text: String) -> Date? {
        if let milliseconds = Int64(text), milliseconds >= 0 {
            return Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        }
        let restored = String(text.map { $0 == " " ? "+" : $0 }).uppercased()
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(restored) { return date }
        return try? Date.ISO8601FormatStyle().parse(restored)
    }
}
