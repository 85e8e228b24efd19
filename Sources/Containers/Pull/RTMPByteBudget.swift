import Synchronization

/// The pictures a pulled stream has handed on, counted by `PulledStream` as each comes and read
/// by its relay's `RTMPByteBudget`.
final class DeliveredPictures: Sendable {
    private let count = Atomic<Int>(0)

    func add() { count.add(1, ordering: .relaxed) }
    var total: Int { count.load(ordering: .relaxed) }
}

/// What an RTMP server may send before a whole picture comes of it. libavformat's RTMP protocol
/// gathers each message (up to 16 MiB, on any number of chunk streams at once) in buffers of its
/// own and hands nothing on until one is whole, so a server that starts messages and never ends
/// them would grow those buffers without bound: the relay ends the connection once `limit`
/// bytes came since the last picture (or since the connection began).
struct RTMPByteBudget: SourceRelayCheck {
    static let limit = ProgressBudget.standardLimit

    private let pictures: DeliveredPictures
    private var budget: ProgressBudget

    init(pictures: DeliveredPictures) {
        self.pictures = pictures
        budget = ProgressBudget(limit: Self.limit, progress: pictures.total)
    }

    var redirect: SourceURL? { nil }

    mutating func take(_ bytes: some Collection<UInt8>) throws(ContainerError) -> [UInt8] {
        guard budget.spend(bytes.count, progress: pictures.total) else {
            throw ContainerError(
                .sourceFailed, "the RTMP server sent more than \(Self.limit >> 20) MiB without a whole picture")
        }
        return Array(bytes)
    }
}

/// What libavformat's RTMP protocol would send as the `connect` command's tcUrl for the source's
/// own URL (`rtmp://host:port/app`), to send it that when it connects to the relay instead:
/// servers that choose a virtual host by the tcUrl's host then see the source's. The application
/// is cut from the path as libavformat 5.1 and later cut it; nil where those versions differ (a
/// path of one segment, an `slist=` query), leaving libavformat's own.
enum RTMPConnectURL {
    static func tcURL(of source: SourceURL) -> String? {
        let path = Array(source.pathAndQuery.utf8)
        guard !source.pathAndQuery.contains("slist=") else { return nil }
        let app: ArraySlice<UInt8>
        if source.pathAndQuery.hasPrefix("/ondemand/") {
            app = Array("ondemand".utf8)[...]
        } else {
            let slash = UInt8(ascii: "/")
            let start = path.isEmpty ? 0 : 1
            guard let first = path[start...].firstIndex(of: slash) else { return nil }
            // An application instance (app/instance/stream) keeps its instance unless a ':' (a
            // playpath prefix such as mp4:) comes before the next '/'.
            let second = path[(first + 1)...].firstIndex(of: slash)
            let colon = path[(first + 1)...].firstIndex(of: UInt8(ascii: ":"))
            if let second, colon.map({ $0 > second }) ?? true {
                app = path[start..<second]
            } else {
                app = path[start..<first]
            }
        }
        return "rtmp://\(source.hostInURL):\(source.port)/\(String(decoding: app, as: UTF8.self))"
    }
}
