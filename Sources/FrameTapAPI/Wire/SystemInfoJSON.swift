/// `GET /system` (openapi.yaml `SystemInfo`); `limits.maxBodyBytes` is `null` when unlimited.
struct SystemInfoJSON: Encodable {
    let info: SystemInfo

    init(_ info: SystemInfo) { self.info = info }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(info.version, forKey: .version)
        try container.encode(info.libavcodec, forKey: .libavcodec)
        try container.encode(info.backendDefault, forKey: .backendDefault)
        try container.encode(info.decoderThreads, forKey: .decoderThreads)
        try container.encode(info.vaapiAvailable, forKey: .vaapiAvailable)
        try container.encode(info.cudaAvailable, forKey: .cudaAvailable)
        try container.encode(HardwareReportJSON(info.hardware), forKey: .hardware)
        try container.encode(info.devices.map(HardwareDeviceUsageJSON.init), forKey: .devices)
        try container.encode(LimitsJSON(info.limits), forKey: .limits)
        try container.encode(info.activeSessions, forKey: .activeSessions)
        try container.encode(DecoderMemoryJSON(info.decoderMemory), forKey: .decoderMemory)
    }

    private enum Key: String, CodingKey {
        case version, libavcodec, backendDefault, decoderThreads, vaapiAvailable, cudaAvailable, hardware, devices
        case limits, activeSessions, decoderMemory
    }

    struct DecoderMemoryJSON: Encodable {
        let usage: SystemInfo.DecoderMemoryUsage

        init(_ usage: SystemInfo.DecoderMemoryUsage) { self.usage = usage }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(usage.limitBytes, forKey: .limitBytes)
            try container.encode(usage.usedBytes, forKey: .usedBytes)
            try container.encode(usage.decoders, forKey: .decoders)
            try container.encode(usage.refusals, forKey: .refusals)
        }

        private enum Key: String, CodingKey { case limitBytes, usedBytes, decoders, refusals }
    }

    struct LimitsJSON: Encodable {
        let limits: SystemInfo.Limits

        init(_ limits: SystemInfo.Limits) { self.limits = limits }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(limits.maxSessions, forKey: .maxSessions)
            try container.encode(limits.maxBodyBytes, forKey: .maxBodyBytes)
            try container.encode(limits.maxSpoolBytes, forKey: .maxSpoolBytes)
            try container.encode(limits.maxSpoolTotalBytes, forKey: .maxSpoolTotalBytes)
            try container.encode(limits.maxNALBytes, forKey: .maxNalBytes)
            try container.encode(limits.maxPictureWidth, forKey: .maxPictureWidth)
            try container.encode(limits.maxPictureHeight, forKey: .maxPictureHeight)
            try container.encode(limits.maxPicturePixels, forKey: .maxPicturePixels)
            try container.encode(limits.sessionIdleTimeoutSeconds, forKey: .sessionIdleTimeoutSeconds)
            try container.encode(limits.maxWaitMilliseconds, forKey: .maxWaitMilliseconds)
        }

        private enum Key: String, CodingKey {
            case maxSessions, maxBodyBytes, maxSpoolBytes, maxSpoolTotalBytes, maxNalBytes, maxPictureWidth, maxPictureHeight
            case maxPicturePixels, sessionIdleTimeoutSeconds, maxWaitMilliseconds
        }
    }
}
