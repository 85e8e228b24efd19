import Containers
import Decoding
import FrameTapAPI
import FoundationEssentials
import HTTPServer
import Imaging
import Ingest
import Logging
import ServiceLog
import Sessions

extension ServeOption {
    /// Every option of `frametap serve`, in the order `--help` and README list them.
    public static let all: [ServeOption] = [
        // The configuration file and what this run does
        text(
            "config", \.configurationFile, valueName: "file", scope: .commandLineAndEnvironment,
            help: "Read options (under `serve:`) and declared sessions (under `sessions:`) from this YAML file.",
            details: "the command line and the environment win over it; see [the configuration file](#the-configuration-file)"),
        ServeOption(
            "print-config", valueName: nil, accepts: nil,
            help: "Print the configuration these options resolve to, as a configuration file (each secret as its variable, `${FRAMETAP_AUTH_TOKEN}`), and exit.",
            scope: .commandLine,
            defaultValue: { _ in .described("off") },
            apply: { _, settings in settings.printConfiguration = true }),

        text(
            "state-dir", \.stateDirectory, valueName: "directory",
            help:
                "Keep the definitions of the sessions made by `PUT` in this directory (not their pictures), and make them again at the next start.",
            details:
                "each change is on disk before its answer; without it, those sessions last as long as the process. See [Cameras](#cameras-declared-sessions-and-sessions-that-stay)"),

        // The HTTP edge
        text("host", \.http.hostOrNil, valueName: "address", help: "Numeric address to listen on (IPv4 or IPv6)."),
        integer("port", \.http.port, .range(0...65535), valueName: "port", help: "TCP port."),
        integer(
            "threads", \.http.threadPoolSize, .range(1...256),
            help: "HTTP worker threads (libmicrohttpd's pool: epoll, suspend/resume).", default: "cores, at least 2"),
        integer(
            "max-connections", \.http.maxConnections, .range(1...1_000_000),
            help: "Open connections at most.",
            details:
                "the last eighth is entered only by closing a connection that makes no progress (see [Slow and hostile clients](#slow-and-hostile-clients))"
        ),
        integer(
            "max-connections-per-ip", \.http.maxConnectionsPerIP, .from(0),
            help: "Open connections per client address at most; `0` = no limit (behind a proxy, where every client is the proxy)."),
        ServeOption(
            "allow-origins", valueName: "list", accepts: "`*`, or comma-separated `SCHEME://HOST[:PORT]` (HOST may be `*.suffix`)",
            help:
                "Pages of other origins that may read answers (CORS): `*` for any, or a list such as `https://dash.example.com,http://localhost:3000`.",
            details:
                "a preflight `OPTIONS` is answered 204 before access control; every header is exposed (`ETag`, `X-Frame-Seq`); no cookies are involved: tokens go in `Authorization` or `access_token`. See [Pages of other origins](#pages-of-other-origins-cors)",
            isList: true,
            defaultValue: { _ in .described("none: same-origin pages only") },
            apply: { text, settings throws(OptionValueError) in
                do throws(CrossOriginPolicyError) {
                    settings.http.crossOrigin = try CrossOriginPolicy(parsing: text)
                } catch {
                    throw OptionValueError(error.message)
                }
            }),
        seconds(
            "header-timeout", \.http.headerTimeout, .above(0, atMost: 3600),
            help: "Seconds a connection has to send a request's headers (slow-loris), from opening or from its previous answer."),
        seconds(
            "body-timeout", \.http.bodyTimeout, .above(0, atMost: 3600),
            help:
                "Seconds a request body may take to deliver each \(HTTPServerConfiguration().bodyProgressBytes) bytes while the server reads it; a slower body is answered 408 `body_timeout` and its connection closed.",
            details: "a live push sends far more; time the server holds an upload back does not count"),

        // Decoding
        integer(
            "decoder-threads", \.server.decoderThreads, .range(0...64),
            help: "libavcodec threads per session (`0` = automatic); `1` keeps latency lowest and lets sessions share cores."),
        choice(
            "backend", \.server.backend, valueName: "backend",
            help:
                "`auto` (NVDEC, then VA-API, then software, per session; each session placed on the device or the CPU with the most headroom, see `--engine-capacity`), `cuda` or `vaapi` (required: a stream the hardware cannot take is a problem answer, not a silent fallback), or `software`."
        ),
        choice(
            "encoder", \.encoder, valueName: "encoder",
            help:
                "`auto` (nvJPEG on the GPU when libnvjpeg.so.12, the NVIDIA driver and a CUDA device are there, else TurboJPEG), `nvjpeg` (the same, but asked for: without them TurboJPEG serves, and says why) or `turbojpeg` (the CPU alone).",
            details:
                "a JPEG of a CUDA-decoded 8-bit 4:2:0 picture at its own size is then encoded by nvJPEG where the decoder left it, so only the JPEG crosses PCIe, its samples made JPEG's on the GPU as the CPU makes them (the range, and a BT.709 or other matrix converted to BT.601); other sizes, raw formats and 10-bit pictures are encoded by TurboJPEG. `/system` and each session's `encoder` say which serves and why"),
        ServeOption(
            "hw-devices", valueName: "list", accepts: HardwareDeviceList.syntax,
            help:
                "Devices sessions may decode on, e.g. `cuda:0,cuda:1,/dev/dri/renderD128`; a new session goes to the least loaded.",
            details: "one CUDA context each (`--cuda-contexts` more), shared by the sessions on it",
            isList: true,
            defaultValue: { _ in .described("every CUDA device, then every render node") },
            apply: { text, settings throws(OptionValueError) in
                guard !text.isEmpty else { return settings.server.hardwareDevices = nil }
                do throws(DecodeError) {
                    settings.server.hardwareDevices = try HardwareDeviceList(parsing: text)
                } catch {
                    throw OptionValueError(error.message)
                }
            }),
        choice(
            "cuda-streams", \.server.cudaStreams, valueName: "mode",
            help:
                "`per-decoder`: each session's NVDEC decoder queues its copies and downloads on a CUDA stream of its own inside the device's one context; `shared`: all of them on the context's default stream, as libavutil does by default.",
            details: "see BENCHMARKS.md, GPU rows, for what each measured"),
        integer(
            "cuda-contexts", \.server.cudaContextsPerDevice, .range(1...16),
            help:
                "CUDA contexts opened on each CUDA device; new sessions' decoders take them in turn (each costs about 0.25 s at first use and its own GPU memory)."),
        ServeOption(
            "engine-capacity", valueName: "list", accepts: EngineCapacityOverrides.syntax,
            help:
                "Decoding capacity of an engine in 1080p-equivalent pictures per second, e.g. `cuda:0:h264=3400,cpu:h264=1400`; with `auto` a new session goes to the engine with the most headroom.",
            details: "a session moves only at a keyframe, only when its engine's load exceeds its capacity",
            isList: true,
            defaultValue: { _ in
                .described("NVDEC \(Int(EngineCapacity.nvdec.rate(.h264))) H.264 / \(Int(EngineCapacity.nvdec.rate(.h265))) H.265; the CPU \(EngineCapacity.cpuDecodingShare) of its cores × \(Int(EngineCapacity.softwarePerCore[.h264] ?? 0)) / \(Int(EngineCapacity.softwarePerCore[.h265] ?? 0))")
            },
            apply: { text, settings throws(OptionValueError) in
                guard !text.isEmpty else { return settings.server.engineCapacities = EngineCapacityOverrides() }
                do throws(DecodeError) {
                    settings.server.engineCapacities = try EngineCapacityOverrides(parsing: text)
                } catch {
                    throw OptionValueError(error.message)
                }
            }),
        memoryBudget(
            "max-decoder-memory", \.server.decoderMemoryLimit,
            help:
                "Bytes every session's decoder may hold together; `auto` is half of the container's memory limit (cgroup) or of the machine's memory.",
            details:
                "Each stream's need is estimated from its SPS (picture size × the pictures its decoder keeps: references, reordering, the one decoding, frame threads, hardware surfaces, and the two FrameTap holds) before any picture is decoded; one that does not fit is refused with `decoder_memory_exceeded` (503, with the figures) and allocates nothing"),
        integer(
            "max-picture-pixels", \.server.pictureSizeLimit.maxPixels, .from(1),
            help:
                "Largest picture decoded (also at most \(PictureSizeLimit.defaultMaxSide) per side), checked from the SPS before decoding: `picture_too_large`."
        ),
        integer(
            "max-nal-bytes", \.server.maxNALBytes, .from(1024), valueName: "bytes",
            help: "Largest NAL unit (larger ones are dropped and counted as `nal_too_large`)."),

        // Sessions and uploads
        integer(
            "max-sessions", \.server.maxSessions, .from(1),
            help: "Most sessions at once; more gets 503 `too_many_sessions` with `Retry-After` (none when every session is kept, so none will expire).",
            details: "a lower value removes no session; it refuses new ones", changesWithoutRestart: true),
        unlimitedOr(
            "max-sessions-per-token", \.server.maxSessionsPerToken, valueName: "count", accepts: "`unlimited`, or at least 1",
            help:
                "Most sessions the pushes of one scoped token may make (tokens for the same sessions share the count); more gets 503 `too_many_sessions` with `limit: token`. The admin token is bound by `--max-sessions` alone.",
            details:
                "on a server shared by several tenants, so that one cannot take every session of `--max-sessions` from the others; see [Access control](#access-control)"),
        seconds(
            "session-idle-timeout", \.server.idleTimeout, .above(0, atMost: 31_536_000),
            help:
                "Seconds without upload, viewer or picture request before a session nobody keeps is removed: one a push made, or one made by `PUT` without `--state-dir`. Reading its status or history keeps nothing alive.",
            details:
                "declared sessions, and sessions made by `PUT` on a server with `--state-dir`, stay until they are deleted or undeclared (see [Cameras](#cameras-declared-sessions-and-sessions-that-stay))",
            changesWithoutRestart: true),
        unlimitedOr(
            "max-body-bytes", \.server.maxBodyBytes, valueName: "bytes", accepts: "`unlimited`, or bytes, at least 1",
            help: "Largest body of one POST (413 `body_too_large`), or `unlimited`."),
        integer(
            "max-spool-bytes", \.server.maxSpoolBytes, .from(1), valueName: "bytes",
            help:
                "Largest body of a POST answered as `multipart/mixed`: its compressed body is spooled to `$TMPDIR` and decoded while the answer streams (413 `body_too_large`)."
        ),
        integer(
            "max-spool-total-bytes", \.server.maxSpoolTotalBytes, .from(1), valueName: "bytes",
            help:
                "What every push answered as `multipart/mixed` may spool together; the one that would pass it is answered 413 `spool_full` at once.",
            details: "the others go on, and an upload gives back what it spooled when it ends"),
        integer(
            "container-seek-window", \.server.containerSeekWindow, .from(0), valueName: "bytes",
            help:
                "Bytes of a container push kept for its demuxer to seek back in; an MP4 whose moov follows its media data needs all of that data.",
            details: "past it the push is `container_needs_seeking` (see [Containers](#containers-and-pulled-sources))"),

        // Decoding on demand and history
        choice(
            "default-decode", \.server.defaultDecode, valueName: "mode",
            help: "How sessions that do not say (`PUT` `decode`) decode: `all`, `keyframes` or `on-demand` (decode only while pictures are asked for).",
            details: "see [On-demand sessions and history](#on-demand-sessions-and-history)"),
        seconds(
            "history-seconds", \.server.historySeconds, .above(0, atMost: 3600),
            help: "Seconds of compressed history each session keeps, from its oldest access unit to its newest, in whole GOPs.",
            details: "several camera GOPs at 1-2 s each; a stream whose keyframes are further apart needs more, since right after the oldest GOP is dropped little more than one is held"),
        integer(
            "history-bytes", \.server.historyBytes, .from(1 << 20), valueName: "bytes",
            help: "Bytes of compressed history each session keeps at most, in whole GOPs.",
            details:
                "64 MiB is 10 s of a 50 Mbit/s stream, or about 2 minutes of a 4 Mbit/s camera: with the default `--history-seconds` the time binds for real cameras and this bounds hostile streams, while a longer history needs its seconds × bit rate ÷ 8 here too; `--max-history-memory` bounds every session's together"
        ),
        memoryBudget(
            "max-history-memory", \.server.historyMemoryLimit,
            help:
                "Bytes every session's history may keep alive together; `auto` is a quarter of the container's memory limit (cgroup) or of the machine's memory.",
            details:
                "past it, the history owning the most (its bytes, or the slabs it keeps alive beyond the two at its ends that it shares with bytes it does not hold) gives up its oldest GOP (its newest, when that is all it holds) until the sum fits, so a session holding less than the others keeps its own; each history keeps at least one 256 KiB slab alive, so a bound of a few MiB holds only a few; counted in `/history` `gopsShed`, `/system` `historyMemory` and `frametap_history_gops_shed_total`"),
        seconds(
            "on-demand-linger", \.server.onDemandLinger, .range(0...86_400),
            help:
                "Seconds an on-demand session keeps decoding after the last request for a picture (or its last MJPEG viewer) before it releases its decoder."
        ),
        integer(
            "max-catchup-decoders", \.server.catchUpDecoders, .range(1...256),
            help: "Catch-ups (on-demand wake-ups, pictures from the past) decoding at once.",
            details: "the rest of the machine stays with live sessions", default: "cores"),
        ServeOption(
            "max-catchup-queue", valueName: "n", accepts: IntegerBounds.range(0...100_000).description,
            help: "Catch-ups waiting for a decoder, in order; past it a request gets 503 `catchup_queue_full` with `Retry-After`.",
            defaultValue: { _ in .described("8 per catch-up decoder") },
            apply: { text, settings throws(OptionValueError) in
                settings.server.catchUpQueue = try wholeNumber(text, .range(0...100_000))
            }),
        integer(
            "catchup-decoder-threads", \.server.catchUpDecoderThreads, .range(0...64),
            help: "libavcodec frame threads of a catch-up decoder (`0` = automatic): a catch-up decodes a GOP while someone waits.",
            default: "2 (at most the cores)"),

        // Pulled sources
        ServeOption(
            "allow-sources", valueName: "list", accepts: "comma-separated `SCHEME://HOST[:PORT]`",
            help:
                "The sources pull sessions may pull from: SCHEME `rtsp`, `rtmp`, `srt`, `http`, `https` or `*`; HOST a name, `*.suffix`, an address, a network (`10.0.0.0/8`, `[fd00::]/8`) or `*`.",
            details:
                "a pull is checked when it starts, and keeps the list it started with for its reconnections and redirects (a reload narrows what pulls start from then on; delete and make a pull again to check it again); the pulls of declared sessions need no entry (see [Cameras](#cameras-declared-sessions-and-sessions-that-stay))",
            isList: true, changesWithoutRestart: true,
            defaultValue: { _ in .described("none: pulling is off") },
            apply: { text, settings throws(OptionValueError) in
                do throws(ContainerError) {
                    settings.server.sourcePolicy = try SourcePolicy(parsing: text)
                } catch {
                    throw OptionValueError(error.message)
                }
            }),
        integer(
            "max-pull-sessions", \.server.maxPullSessions, .from(0),
            help: "Sessions that pull at once (503 `too_many_pull_sessions` past it).", changesWithoutRestart: true),
        seconds(
            "source-connect-timeout", \.server.sourceConnectTimeout, .range(0.1...86_400),
            help: "Seconds a pull has to connect and read its stream's header."),
        seconds(
            "source-read-timeout", \.server.sourceReadTimeout, .range(0.1...86_400),
            help: "Seconds a live pull may go without sending a whole packet of its stream before it is lost and retried."),
        seconds(
            "source-retry-max", \.server.sourceRetryMax, .range(0.5...86_400),
            help: "The longest wait between a pull's attempts (the back-off starts at 0.5 s and doubles)."),

        // Access control and TLS
        text(
            "auth-token", \.authToken, valueName: "token", isSecret: true,
            help:
                "The admin token: it may do everything. With it, `--jwt-secret` or `--jwks-file`, every route but `/healthz` and the console needs a token.",
            details: "see [Access control](#access-control)"),
        text(
            "jwt-secret", \.jwtSecret, valueName: "secret", isSecret: true,
            help:
                "Accept HS256 JWTs signed with this secret (at least 32 bytes), scoped by their `frametap:scope` and `frametap:sessions` claims.",
            check: { text throws(OptionValueError) in
                do throws(AccessControlError) {
                    try AccessControl.Credentials.checkSecret(text)
                } catch {
                    throw OptionValueError(error.message)
                }
            }),
        text(
            "jwks-file", \.jwksFile, valueName: "file",
            help: "Accept RS256 and ES256 JWTs signed by a key of this JWKS file (`{\"keys\": [...]}`); read at start.",
            details: "a broken file stops the start, keys of other algorithms are logged and left out"),
        text(
            "tls-cert", \.tlsCertificate, valueName: "file",
            help: "Serve HTTPS only, with this PEM certificate chain (leaf first); needs `--tls-key`.",
            details: "`SIGHUP` reloads both for new connections (a broken file keeps the previous pair)"),
        text("tls-key", \.tlsKey, valueName: "file", help: "The PEM private key of `--tls-cert`."),

        // Logging
        choice(
            "log-level", \.logLevel, valueName: "level", ignoringCase: true,
            help: "swift-log level; `debug` also lets libavcodec's and libavformat's own warnings through.",
            details:
                "no log line shows a source's credentials: FrameTap's own never name them, and libavformat's go through the same redaction (user info and secret parameters in paths, queries and `;` parameters). Text from outside (a source's answer, a container's metadata) has its control characters written out (`\\u{1B}`) and is cut at 4,096 characters. The log takes 200 lines at once and 20 a second after that; past that lines are left out and the next line written says how many (`left_out`). Errors, the `notice` lines of the server's own life (listening, reloads, stopping) and a pulled source's lines (lost, failed, connected: its backoff bounds them) always go",
            changesWithoutRestart: true
        ),
        choice(
            "log-format", \.logFormat, valueName: "format", ignoringCase: true,
            help: "`text`: swift-log's lines; `json`: one JSON object a line for log shippers.",
            details:
                "each JSON line has `time` (ISO 8601 in UTC, milliseconds), `level`, `logger`, `source` (the module), `message` and, when there is any, `metadata` as an object; libav's own lines (`--log-level debug`) come as lines of logger `libav`, in either format. The first line (`starting`, a notice) names the version, the process id and the options given, each with where it came from (a secret as `<not shown>`). Asked for on the command line or in the environment, `json` also holds for a start refused for its options: one `critical` line, `cannot start`, with the `reason` (exit 64)"
        ),
    ]

    /// The option of this long name (without its dashes).
    public static func named(_ name: String) -> ServeOption? { all.first { $0.name == name } }
}

extension HTTPServerConfiguration {
    /// `--host`: the address as given (the HTTP server refuses one it cannot bind).
    fileprivate var hostOrNil: String? {
        get { host }
        set { host = newValue ?? host }
    }
}
