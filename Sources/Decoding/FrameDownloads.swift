import CFFmpeg
import Synchronization

/// Counts copies of decoded pictures from GPU memory to system memory, for `/metrics`.
///
/// Downloading costs more than decoding (measured on an H100, one 1080p stream: 590 fps
/// decoding alone, 147 fps downloading every picture), so pictures stay on the device until
/// something reads their pixels; this counter shows how many were actually needed.
/// `DecoderOptions.frameDownloads` is `shared` unless a caller (a test) injects its own.
public final class FrameDownloadCounter: Sendable {
    public static let shared = FrameDownloadCounter()

    private let downloadCount = Atomic<Int>(0)
    private let spillCount = Atomic<Int>(0)
    private let failureCount = Atomic<Int>(0)
    private let byteCount = Atomic<Int>(0)

    public init() {}

    /// Pictures copied to system memory (each at most once).
    public var downloads: Int { downloadCount.load(ordering: .relaxed) }
    /// Of `downloads`, those the decoder made itself to hand a surface back to its pool
    /// because more pictures than `DecoderOptions.deviceFramesHeld` were still alive on the device.
    public var spills: Int { spillCount.load(ordering: .relaxed) }
    /// Downloads that failed (the picture then has no pixels; see `DecodedFrame.downloadError`).
    public var failures: Int { failureCount.load(ordering: .relaxed) }
    /// Bytes of the downloaded pictures (their packed planes).
    public var bytes: Int { byteCount.load(ordering: .relaxed) }

    func recordDownload(bytes: Int, spilled: Bool) {
        downloadCount.add(1, ordering: .relaxed)
        byteCount.add(bytes, ordering: .relaxed)
        if spilled { spillCount.add(1, ordering: .relaxed) }
    }

    func recordFailure() {
        failureCount.add(1, ordering: .relaxed)
    }
}

/// Keeps at most `limit` of one decoder's pictures on the device.
///
/// A picture still on the device holds one of the decoder's surfaces (NVDEC in libavcodec 5.1
/// keeps the decode surface mapped for as long as the AVFrame lives; VA-API surfaces come from
/// a fixed pool). The codec context gets `limit + 1` extra surfaces (`extra_hw_frames`), and
/// once `limit` pictures are alive on the device, the oldest is downloaded before a new one is
/// handed out, so no caller can starve the pool however many pictures it keeps. Pictures
/// nobody keeps free their surface as soon as they are released, without a download.
struct DeviceFrameBudget {
    let limit: Int
    private var held: [WeakFrame] = []

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    private struct WeakFrame {
        weak var frame: DecodedFrame?
    }

    mutating func admit(_ frame: DecodedFrame) {
        held.removeAll { $0.frame?.isOnDevice != true }
        while held.count >= limit {
            let oldest = held.removeFirst()
            oldest.frame?.spillToSystemMemory()
        }
        held.append(WeakFrame(frame: frame))
    }

    /// Pictures of this decoder still on the device (for tests).
    var onDevice: Int { held.filter { $0.frame?.isOnDevice == true }.count }
}
