import Ingest
import Sessions

/// The JSON answer of `POST /sessions/{id}/nalus` (openapi.yaml `PushSummary`): what this
/// request carried and produced; optional members are `null`, never left out.
struct UploadSummaryJSON: WireObject {
    let summary: UploadSummary

    init(_ summary: UploadSummary) { self.summary = summary }

    var members: KeyValuePairs<String, any Encodable> {
        [
            "session": summary.session.rawValue,
            "bytes": summary.bytes,
            "nalUnits": summary.nalUnits,
            "frames": summary.frames,
            "latestSeq": summary.latestSeq,
            "format": summary.format.map(StreamFormatJSON.init),
            "decodeErrors": summary.decodeErrors,
            "error": summary.error.map(ErrorRecordJSON.init),
            "flushed": summary.flushed,
        ]
    }
}
