import Decoding
import Foundation
import H264
import Imaging

typealias UploadCompletion = @Sendable (Result<UploadSummary, SessionError>) -> Void
typealias EncodeCompletion = @Sendable (Result<EncodedPicture, SessionError>) -> Void

/// Everything of a session that more than one thread touches, guarded by `Session.state`.
struct State {
    var closed = false
    var lastActivity: Date
    var lastActivityUptime: UInt64
    var backendChoice: DecoderBackendChoice
    var backend: DecoderBackend
    var backendReason: String
    var decodeMode: DecodeMode
    var quality: Int
    var counters = SessionCounters()
    var format: VideoFormat?
    var lastError: ErrorRecord?
    var latest: PublishedFrame?
    var nextSequence: UInt64 = 1

    // Ingest: one writer at a time; its bytes wait in `queue` for the decode worker.
    var writer: Writer?
    var nextWriterID: UInt64 = 1
    var queue: [IngestItem] = []
    var queuedBytes = 0
    /// The paused uploader's wake-up, called once the decoder has made room.
    var roomCallback: (@Sendable () -> Void)?
    /// A decode-worker block is draining `queue`.
    var draining = false
    var spool: SpooledUpload?

    // Pictures
    var cache: [PictureKey: EncodedPicture] = [:]
    var cacheOrder: [PictureKey] = []
    /// Encodings of pictures older than this are dropped (set on each publish to the previous newest).
    var cacheFloor: UInt64 = 0
    var inFlight: [PictureKey: [EncodeCompletion]] = [:]
    var encodes = 0
    var waiters: [UInt64: Waiter] = [:]
    var nextWaiterID: UInt64 = 1
    var subscribers: [UInt64: SubscriberState] = [:]
    var nextSubscriberID: UInt64 = 1

    /// Encodings kept per session; beyond it the oldest go (a client walking through many
    /// thumbnail sizes must not grow memory).
    static let cacheLimit = 16

    mutating func evictCache(olderThan sequence: UInt64) {
        guard cacheOrder.contains(where: { $0.sequence < sequence }) else { return }
        cacheOrder.removeAll { key in
            guard key.sequence < sequence else { return false }
            cache[key] = nil
            return true
        }
    }

    mutating func insertCache(_ picture: EncodedPicture, for key: PictureKey) {
        guard cache.updateValue(picture, forKey: key) == nil else { return }
        cacheOrder.append(key)
        while cacheOrder.count > Self.cacheLimit {
            cache[cacheOrder.removeFirst()] = nil
        }
    }

    /// On a new newest picture: the long-polls it answers and the viewers waiting for one.
    mutating func takeWakeUps(newest: PublishedFrame) -> WakeUps {
        var wake = WakeUps()
        wake.newest = newest
        for (id, waiter) in waiters where waiter.newerThan < newest.sequence {
            wake.waiters.append(waiter)
            waiters[id] = nil
        }
        wake.subscribers = subscribers.compactMap { $0.value.callback == nil ? nil : $0.key }
        return wake
    }
}

struct Writer {
    let id: UInt64
    var bytes = 0
    var failure: SessionError?
}

enum IngestItem {
    case begin(UploadProgress)
    case bytes([UInt8], receivedAt: UInt64, UploadProgress)
    case finish(flush: Bool, bytes: Int, failure: SessionError?, UploadProgress, UploadCompletion)
    case abort(UploadProgress)

    var finishCompletion: UploadCompletion? {
        if case .finish(_, _, _, _, let completion) = self { return completion }
        return nil
    }
}

struct Waiter {
    let newerThan: UInt64
    let request: PictureRequest
    let quality: Int
    let completion: @Sendable (Result<PictureAnswer, SessionError>) -> Void
}
