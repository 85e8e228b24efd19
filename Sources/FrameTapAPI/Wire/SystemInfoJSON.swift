import Imaging
import SessionCatalog

/// `GET /system` (openapi.yaml `SystemInfo`); `limits.maxBodyBytes` is `null` when unlimited.
struct SystemInfoJSON: WireObject {
    let info: SystemInfo

    init(_ info: SystemInfo) { self.info = info }

    var members: KeyValuePairs<String, any Encodable> {
        [
            "version": info.version,
            "libavcodec": info.libavcodec,
            "backendDefault": info.backendDefault,
            "decoderThreads": info.decoderThreads,
            "encoder": PictureEncoderJSON(info.encoder),
            "vaapiAvailable": info.vaapiAvailable,
            "cudaAvailable": info.cudaAvailable,
            "hardware": HardwareReportJSON(info.hardware),
            "devices": info.devices.map(HardwareDeviceUsageJSON.init),
            "engines": info.engines.map(EngineReportJSON.init),
            "limits": LimitsJSON(info.limits),
            "activeSessions": info.activeSessions,
            "decoderMemory": DecoderMemoryJSON(info.decoderMemory),
            "historyMemory": HistoryMemoryJSON(info.historyMemory),
            "configuration": ConfigurationJSON(info.configurationFile),
        ]
    }

    /// The configuration file and its last reading, `--state-dir` and what it keeps.
    struct ConfigurationJSON: WireObject {
        let file: SystemInfo.ConfigurationFile

        init(_ file: SystemInfo.ConfigurationFile) { self.file = file }

        var members: KeyValuePairs<String, any Encodable> {
            let status = file.status
            return [
                "file": status?.file,
                "appliedAt": status?.appliedAt.map(WireJSON.timestamp),
                "lastReading": status?.lastReading.map(ReadingJSON.init),
                "readings": ReadingCountsJSON(applied: status?.applied ?? 0, rejected: status?.rejected ?? 0),
                "declaredSessions": file.declaredSessions,
                "stateDirectory": file.stateDirectory,
                "persistedSessions": file.persistedSessions,
            ]
        }
    }

    struct ReadingCountsJSON: Encodable {
        let applied: Int
        let rejected: Int
    }

    /// One reading of the configuration file: applied (`error` null) or refused.
    struct ReadingJSON: WireObject {
        let reading: ConfigurationStatus.Reading

        init(_ reading: ConfigurationStatus.Reading) { self.reading = reading }

        var members: KeyValuePairs<String, any Encodable> {
            [
                "at": WireJSON.timestamp(reading.at),
                "trigger": reading.trigger.rawValue,
                "result": reading.rejection == nil ? "applied" : "rejected",
                "error": reading.rejection.map(RejectionJSON.init),
                "changes": reading.changes,
                "restartNeeded": reading.restartNeeded,
            ]
        }
    }

    struct RejectionJSON: WireObject {
        let rejection: ConfigurationStatus.Rejection

        init(_ rejection: ConfigurationStatus.Rejection) { self.rejection = rejection }

        var members: KeyValuePairs<String, any Encodable> {
            [
                "message": rejection.message,
                "file": rejection.file,
                "line": rejection.line,
                "column": rejection.column,
            ]
        }
    }

    struct DecoderMemoryJSON: WireObject {
        let usage: SystemInfo.DecoderMemoryUsage

        init(_ usage: SystemInfo.DecoderMemoryUsage) { self.usage = usage }

        var members: KeyValuePairs<String, any Encodable> {
            [
                "limitBytes": usage.limitBytes,
                "usedBytes": usage.usedBytes,
                "decoders": usage.decoders,
                "refusals": usage.refusals,
            ]
        }
    }

    struct HistoryMemoryJSON: WireObject {
        let usage: SystemInfo.HistoryMemoryUsage

        init(_ usage: SystemInfo.HistoryMemoryUsage) { self.usage = usage }

        var members: KeyValuePairs<String, any Encodable> {
            [
                "limitBytes": usage.limitBytes,
                "usedBytes": usage.usage.bytes,
                "histories": usage.usage.histories,
                "gopsShed": usage.usage.gopsShed,
            ]
        }
    }

    struct LimitsJSON: WireObject {
        let limits: SystemInfo.Limits

        init(_ limits: SystemInfo.Limits) { self.limits = limits }

        var members: KeyValuePairs<String, any Encodable> {
            [
                "maxSessions": limits.maxSessions,
                "maxSessionsPerToken": limits.maxSessionsPerToken,
                "maxBodyBytes": limits.maxBodyBytes,
                "maxSpoolBytes": limits.maxSpoolBytes,
                "maxSpoolTotalBytes": limits.maxSpoolTotalBytes,
                "maxNalBytes": limits.maxNALBytes,
                "maxPictureWidth": limits.maxPictureWidth,
                "maxPictureHeight": limits.maxPictureHeight,
                "maxPicturePixels": limits.maxPicturePixels,
                "sessionIdleTimeoutSeconds": limits.sessionIdleTimeoutSeconds,
                "maxWaitMilliseconds": limits.maxWaitMilliseconds,
                "historySeconds": limits.historySeconds,
                "historyBytes": limits.historyBytes,
                "maxCatchupDecoders": limits.maxCatchupDecoders,
                "maxCatchupQueue": limits.maxCatchupQueue,
            ]
        }
    }
}

/// Which picture encoder serves and why (`/system`'s `encoder`, each session's `encoder`).
struct PictureEncoderJSON: WireObject {
    let identity: PictureEncoderIdentity

    init(_ identity: PictureEncoderIdentity) { self.identity = identity }

    var members: KeyValuePairs<String, any Encodable> {
        [
            "name": identity.name,
            "reason": identity.reason,
        ]
    }
}
