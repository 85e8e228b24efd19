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
        ])
    }

    private enum Key: String, CodingKey {
        case version, libavcodec, backendDefault, decoderThreads, vaapiAvailable, cudaAvailable, hardware, devices
        case limits, activeSessions, decoderMemory
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
