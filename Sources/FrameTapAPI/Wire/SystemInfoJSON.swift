import SessionCatalog

/// `GET /system` (openapi.yaml `SystemInfo`); `limits.maxBodyBytes` is `null` when unlimited.
struct SystemInfoJSON: Encodable {
    let info: SystemInfo

    init(_ info: SystemInfo) { self.info = info }

    func encode(to encoder: any Encoder) throws {
        try encoder.encodeObject(Key.self, [
            .version: info.version,
            .libavcodec: info.libavcodec,
            .backendDefault: info.backendDefault,
            .decoderThreads: info.decoderThreads,
            .vaapiAvailable: info.vaapiAvailable,
            .cudaAvailable: info.cudaAvailable,
            .hardware: HardwareReportJSON(info.hardware),
            .devices: info.devices.map(HardwareDeviceUsageJSON.init),
            .limits: LimitsJSON(info.limits),
            .activeSessions: info.activeSessions,
            .decoderMemory: DecoderMemoryJSON(info.decoderMemory),
            .configuration: ConfigurationJSON(info.configurationFile),
        ])
    }

    private enum Key: String, CodingKey {
        case version, libavcodec, backendDefault, decoderThreads, vaapiAvailable, cudaAvailable, hardware, devices
        case limits, activeSessions, decoderMemory, configuration
    }

    /// The configuration file and its last reading, `--state-dir` and what it keeps.
    struct ConfigurationJSON: Encodable {
        let file: SystemInfo.ConfigurationFile

        init(_ file: SystemInfo.ConfigurationFile) { self.file = file }

        func encode(to encoder: any Encoder) throws {
            let status = file.status
            try encoder.encodeObject(Key.self, [
                .file: status?.file,
                .appliedAt: status?.appliedAt.map(WireJSON.timestamp),
                .lastReading: status?.lastReading.map(ReadingJSON.init),
                .readings: ReadingCountsJSON(applied: status?.applied ?? 0, rejected: status?.rejected ?? 0),
                .declaredSessions: file.declaredSessions,
                .stateDirectory: file.stateDirectory,
                .persistedSessions: file.persistedSessions,
            ])
        }

        private enum Key: String, CodingKey {
            case file, appliedAt, lastReading, readings, declaredSessions, stateDirectory, persistedSessions
        }
    }

    struct ReadingCountsJSON: Encodable {
        let applied: Int
        let rejected: Int
    }

    /// One reading of the configuration file: applied (`error` null) or refused.
    struct ReadingJSON: Encodable {
        let reading: ConfigurationStatus.Reading

        init(_ reading: ConfigurationStatus.Reading) { self.reading = reading }

        func encode(to encoder: any Encoder) throws {
            try encoder.encodeObject(Key.self, [
                .at: WireJSON.timestamp(reading.at),
                .trigger: reading.trigger.rawValue,
                .result: reading.rejection == nil ? "applied" : "rejected",
                .error: reading.rejection.map(RejectionJSON.init),
                .changes: reading.changes,
                .restartNeeded: reading.restartNeeded,
            ])
        }

        private enum Key: String, CodingKey { case at, trigger, result, error, changes, restartNeeded }
    }

    struct RejectionJSON: Encodable {
        let rejection: ConfigurationStatus.Rejection

        init(_ rejection: ConfigurationStatus.Rejection) { self.rejection = rejection }

        func encode(to encoder: any Encoder) throws {
            try encoder.encodeObject(Key.self, [
                .message: rejection.message,
                .file: rejection.file,
                .line: rejection.line,
                .column: rejection.column,
            ])
        }

        private enum Key: String, CodingKey { case message, file, line, column }
    }

    struct DecoderMemoryJSON: Encodable {
        let usage: SystemInfo.DecoderMemoryUsage

        init(_ usage: SystemInfo.DecoderMemoryUsage) { self.usage = usage }

        func encode(to encoder: any Encoder) throws {
            try encoder.encodeObject(Key.self, [
                .limitBytes: usage.limitBytes,
                .usedBytes: usage.usedBytes,
                .decoders: usage.decoders,
                .refusals: usage.refusals,
            ])
        }

        private enum Key: String, CodingKey { case limitBytes, usedBytes, decoders, refusals }
    }

    struct LimitsJSON: Encodable {
        let limits: SystemInfo.Limits

        init(_ limits: SystemInfo.Limits) { self.limits = limits }

        func encode(to encoder: any Encoder) throws {
            try encoder.encodeObject(Key.self, [
                .maxSessions: limits.maxSessions,
                .maxBodyBytes: limits.maxBodyBytes,
                .maxSpoolBytes: limits.maxSpoolBytes,
                .maxSpoolTotalBytes: limits.maxSpoolTotalBytes,
                .maxNalBytes: limits.maxNALBytes,
                .maxPictureWidth: limits.maxPictureWidth,
                .maxPictureHeight: limits.maxPictureHeight,
                .maxPicturePixels: limits.maxPicturePixels,
                .sessionIdleTimeoutSeconds: limits.sessionIdleTimeoutSeconds,
                .maxWaitMilliseconds: limits.maxWaitMilliseconds,
            ])
        }

        private enum Key: String, CodingKey {
            case maxSessions, maxBodyBytes, maxSpoolBytes, maxSpoolTotalBytes, maxNalBytes, maxPictureWidth, maxPictureHeight
            case maxPicturePixels, sessionIdleTimeoutSeconds, maxWaitMilliseconds
        }
    }
}
