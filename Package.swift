// swift-tools-version:6.2
import PackageDescription

// Each target has one job; see README "Layout". The C modules are thin system-library
// maps (plus one real C file for the variadic libmicrohttpd entry point).
let strictSwift: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "FrameTap",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "frametap", targets: ["frametap"]),
        // The micro-benchmarks of `make bench` (Splitter, JPEG encode); not used by the tests.
        .executable(name: "frametap-bench", targets: ["FrameTapBench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Scoped bearer tokens (AccessControl): jwt-kit parses tokens and JWKS; swift-crypto, which
        // it is built on, checks the signatures synchronously on the request thread.
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.1.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CFFmpeg",
            pkgConfig: "libavcodec",
            providers: [.apt(["libavcodec-dev", "libavformat-dev", "libavutil-dev", "libswscale-dev", "libva-dev"])]
        ),
        .systemLibrary(
            name: "CTurboJPEG",
            pkgConfig: "libturbojpeg",
            providers: [.apt(["libturbojpeg0-dev"])]
        ),
        // libyaml's parser, for the configuration file (`frametap serve --config`): its events
        // carry each node's line, so an error names the line it is on.
        .systemLibrary(
            name: "CYAML",
            pkgConfig: "yaml-0.1",
            providers: [.apt(["libyaml-dev"])]
        ),
        // libmicrohttpd, plus GnuTLS for its TLS certificates (see tls.c).
        .target(
            name: "CMicroHTTPD",
            linkerSettings: [.linkedLibrary("microhttpd"), .linkedLibrary("gnutls")]
        ),
        // The one clock every part reads (the real one, or in tests one moved by hand).
        .target(name: "Timekeeping", swiftSettings: strictSwift),
        // The bitstream layer: what H.264 and H.265 share, then each codec (pure Swift, no C).
        .target(name: "VideoCoding", swiftSettings: strictSwift),
        .target(name: "H264", dependencies: ["VideoCoding"], swiftSettings: strictSwift),
        .target(name: "H265", dependencies: ["VideoCoding"], swiftSettings: strictSwift),
        // The bitstream layer's front: which codec a stream is, and that codec's reader.
        .target(name: "Bitstream", dependencies: ["VideoCoding", "H264", "H265"], swiftSettings: strictSwift),
        .target(name: "Decoding", dependencies: ["VideoCoding", "Bitstream", "CFFmpeg", "Timekeeping"], swiftSettings: strictSwift),
        .target(name: "Imaging", dependencies: ["Decoding", "CFFmpeg", "CTurboJPEG"], swiftSettings: strictSwift),
        // libavformat as the container and protocol layer: pushed MPEG-TS, MP4, Matroska and FLV
        // read through FrameTap's own I/O, streams pulled over RTSP, RTMP, SRT and HTTP.
        .target(name: "Containers", dependencies: ["VideoCoding", "CFFmpeg", "Timekeeping"], swiftSettings: strictSwift),
        // Every input of a session behind one source protocol: pushes (live, spooled, through a
        // container's demuxer) and pulls, and the one bounded queue their producers use.
        .target(
            name: "Ingest",
            dependencies: [
                "VideoCoding", "Containers", "Timekeeping",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift
        ),
        .target(
            name: "Sessions",
            dependencies: [
                "VideoCoding", "Decoding", "Imaging", "Containers", "Ingest", "Timekeeping",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strictSwift
        ),
        // Which sessions exist by whose word: those the configuration file declares (and each
        // reading's plan of the difference) and those made by PUT, kept in --state-dir.
        .target(
            name: "SessionCatalog",
            dependencies: [
                "Sessions", "Ingest", "Containers", "Decoding", "VideoCoding", "Timekeeping",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strictSwift
        ),
        // The process's log: one switchable level, outside text made printable, a budget of lines,
        // text or JSON lines (JSON strings quoted as HTTPServer quotes its problem documents').
        .target(
            name: "ServiceLog",
            dependencies: ["HTTPServer", "Timekeeping", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strictSwift
        ),
        // HTTP only: the libmicrohttpd daemon, routing, requests and responses, streaming.
        .target(
            name: "HTTPServer",
            dependencies: [
                "CMicroHTTPD", "Timekeeping",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift
        ),
        // FrameTap's routes and handlers: the HTTP API over the session layer.
        .target(
            name: "FrameTapAPI",
            dependencies: [
                "HTTPServer", "Sessions", "SessionCatalog", "Ingest", "Decoding", "Imaging", "Containers", "Timekeeping",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            // The web console's files, embedded by the EmbedConsole plugin (why not
            // `.embedInCode`: Plugins/EmbedConsole/plugin.swift).
            exclude: ["Console"],
            swiftSettings: strictSwift,
            plugins: ["EmbedConsole"]
        ),
        // `frametap serve`'s options, one row each: its command line, environment variables, the
        // configuration file (with the sessions it declares), the help and README's table.
        .target(
            name: "ServeOptions",
            dependencies: [
                "HTTPServer", "Sessions", "SessionCatalog", "Ingest", "FrameTapAPI", "Decoding", "Imaging", "Containers", "Timekeeping",
                "CYAML", "ServiceLog",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift
        ),
        // `frametap sync`: the configuration file's sessions kept in place across a cluster,
        // through the gateway that routes by session id.
        .target(
            name: "SessionSync",
            dependencies: [
                "Containers", "Sessions", "FrameTapAPI", "ServeOptions", "Timekeeping",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift
        ),
        .executableTarget(name: "ConsoleEmbedder", swiftSettings: strictSwift),
        .plugin(name: "EmbedConsole", capability: .buildTool(), dependencies: ["ConsoleEmbedder"]),
        .executableTarget(
            name: "frametap",
            dependencies: [
                "VideoCoding", "Bitstream", "Decoding", "Imaging", "Containers", "Ingest", "Sessions", "SessionCatalog", "HTTPServer",
                "FrameTapAPI", "Timekeeping", "ServeOptions", "SessionSync", "ServiceLog",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift
        ),
        .executableTarget(
            name: "FrameTapBench", dependencies: ["VideoCoding", "H264", "Decoding", "Imaging"], swiftSettings: strictSwift),
        .testTarget(name: "VideoCodingTests", dependencies: ["VideoCoding", "TestSupport"], swiftSettings: strictSwift),
        .testTarget(name: "H264Tests", dependencies: ["VideoCoding", "H264", "TestSupport"], swiftSettings: strictSwift),
        .testTarget(name: "H265Tests", dependencies: ["VideoCoding", "H265", "TestSupport"], swiftSettings: strictSwift),
        // The front: codec detection, each codec's reader chosen, `frametap probe`'s descriptions.
        .testTarget(name: "BitstreamTests", dependencies: ["Bitstream", "VideoCoding", "TestSupport"], swiftSettings: strictSwift),
        .testTarget(name: "TimekeepingTests", dependencies: ["Timekeeping", "TestSupport"], swiftSettings: strictSwift),
        .testTarget(
            name: "ContainersTests", dependencies: ["Containers", "Bitstream", "Decoding", "VideoCoding", "TestSupport", "Timekeeping"],
            swiftSettings: strictSwift),
        // Pretend decoding and encoding hardware (no GPU here or in CI), shared by the decoder and session tests.
        .target(
            name: "HardwareTestSupport", dependencies: ["Decoding", "Imaging", "VideoCoding"], path: "Tests/HardwareTestSupport",
            swiftSettings: strictSwift),
        .testTarget(
            name: "DecodingTests", dependencies: ["Decoding", "VideoCoding", "H264", "HardwareTestSupport", "TestSupport"],
            swiftSettings: strictSwift),
        .testTarget(
            name: "ImagingTests", dependencies: ["Imaging", "Decoding", "H264", "CTurboJPEG", "TestSupport"],
            swiftSettings: strictSwift),
        // How tests build what sessions share (`SessionServices`), for the session and API tests.
        .target(
            name: "SessionsTestSupport", dependencies: ["Sessions", "Decoding", "Imaging", "Timekeeping"],
            path: "Tests/SessionsTestSupport", swiftSettings: strictSwift),
        .testTarget(
            name: "SessionsTests",
            dependencies: [
                "Sessions", "Ingest", "Decoding", "Imaging", "HardwareTestSupport", "SessionsTestSupport", "TestSupport",
                "Timekeeping",
            ],
            swiftSettings: strictSwift),
        // The inputs on their own: the queues and their handshake, without a session.
        .testTarget(
            name: "IngestTests", dependencies: ["Ingest", "Containers", "TestSupport", "Timekeeping", "VideoCoding"], swiftSettings: strictSwift),
        // Test helpers shared by the test targets (waits with deadlines, the fixtures and their
        // manifests, a raw HTTP client, MD5, the manual clock, a bit writer); nothing ships it.
        .target(name: "TestSupport", dependencies: ["Timekeeping"], path: "Tests/TestSupport", swiftSettings: strictSwift),
        .testTarget(
            name: "ServiceLogTests", dependencies: ["ServiceLog", "TestSupport", "Timekeeping"], swiftSettings: strictSwift),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "TestSupport", "Timekeeping"], swiftSettings: strictSwift),
        // The test helpers themselves: every wait ends at its deadline, naming what it waited for.
        .testTarget(name: "TestSupportTests", dependencies: ["TestSupport"], swiftSettings: strictSwift),
        .testTarget(
            name: "ServeOptionsTests",
            dependencies: [
                "ServeOptions", "HTTPServer", "Sessions", "SessionCatalog", "FrameTapAPI", "Ingest", "Decoding", "Containers",
                "SessionsTestSupport", "TestSupport", "Timekeeping", "ServiceLog",
            ],
            swiftSettings: strictSwift),
        // Declared and kept sessions: the plan of a reading's difference, its application, the state file.
        .testTarget(
            name: "SessionCatalogTests",
            dependencies: [
                "SessionCatalog", "Sessions", "Ingest", "Containers", "Decoding", "VideoCoding", "SessionsTestSupport",
                "TestSupport", "Timekeeping",
            ],
            swiftSettings: strictSwift),
        .testTarget(
            name: "SessionSyncTests",
            dependencies: [
                "SessionSync", "ServeOptions", "FrameTapAPI", "HTTPServer", "Sessions", "Containers", "SessionsTestSupport",
                "TestSupport", "Timekeeping",
            ],
            swiftSettings: strictSwift),
        .testTarget(
            name: "FrameTapAPITests",
            dependencies: [
                "FrameTapAPI", "HTTPServer", "Sessions", "SessionCatalog", "Ingest", "Imaging", "SessionsTestSupport",
                "TestSupport",
                // AccessControlTests mint real tokens with keys they generate.
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strictSwift),
    ],
    swiftLanguageModes: [.v6]
)
