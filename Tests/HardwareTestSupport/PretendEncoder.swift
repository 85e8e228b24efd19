import Decoding
import Imaging
import Synchronization

/// A picture encoder factory whose encoders report themselves as a GPU's (`pretend-nvjpeg`
/// unless told otherwise) while a real `TurboJPEGEncoder` does the work, and which records
/// every call: how many encoders it made, and for each encode which encoder, which picture,
/// the options, and whether the picture was still on the device. It lets tests check the
/// encoder seam (who makes encoders, who they serve, what they are asked) without a GPU.
public final class PretendGPUEncoderFactory: PictureEncoderFactory {
    /// One `encode` call, as the encoder was asked it.
    public struct Call: Sendable, Equatable {
        /// Which of the factory's encoders (1 for the first made).
        public let encoder: Int
        /// Which picture: the index of the access unit it was decoded from.
        public let accessUnit: Int64?
        public let options: PictureOptions
        /// The picture was still in device memory when the encoder got it.
        public let onDevice: Bool

        public init(encoder: Int, accessUnit: Int64?, options: PictureOptions, onDevice: Bool) {
            self.encoder = encoder
            self.accessUnit = accessUnit
            self.options = options
            self.onDevice = onDevice
        }
    }

    public let identity: PictureEncoderIdentity
    private let made = Atomic<Int>(0)
    private let recorded = Mutex<[Call]>([])

    public init(name: String = "pretend-nvjpeg", reason: String = "a test's pretend GPU encoder") {
        identity = PictureEncoderIdentity(name: name, reason: reason)
    }

    public func makeEncoder() throws(ImagingError) -> any PictureEncoding {
        let inner = try TurboJPEGEncoder()
        return PretendGPUEncoder(number: made.add(1, ordering: .relaxed).newValue, factory: self, inner: inner)
    }

    /// Encoders made so far.
    public var encodersMade: Int { made.load(ordering: .relaxed) }

    /// Every encode so far, in the order they began.
    public var calls: [Call] { recorded.withLock { $0 } }

    fileprivate func record(_ call: Call) {
        recorded.withLock { $0.append(call) }
    }
}

private final class PretendGPUEncoder: PictureEncoding {
    let number: Int
    let factory: PretendGPUEncoderFactory
    let inner: TurboJPEGEncoder

    init(number: Int, factory: PretendGPUEncoderFactory, inner: TurboJPEGEncoder) {
        self.number = number
        self.factory = factory
        self.inner = inner
    }

    var identity: PictureEncoderIdentity { factory.identity }

    func encode(_ frame: DecodedFrame, _ options: PictureOptions) throws(ImagingError) -> EncodedPicture {
        factory.record(
            PretendGPUEncoderFactory.Call(
                encoder: number, accessUnit: frame.accessUnitIndex, options: options, onDevice: frame.isOnDevice))
        return try inner.encode(frame, options)
    }
}
