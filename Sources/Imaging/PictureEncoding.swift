import Decoding

/// Turns decoded pictures into the bytes readers get (JPEG, raw YUV, raw RGB), at the size,
/// quality and format a `PictureOptions` asks for: the seam every picture encoder plugs into.
/// The production one is `TurboJPEGEncoder`, on the CPU; tests inject others through a
/// `PictureEncoderFactory`.
///
/// An encoder is handed the `DecodedFrame` itself, not its planes: a picture a hardware decoder
/// made may still be in device memory (`DecodedFrame.isOnDevice`), and it is downloaded only
/// when an encoder reads its planes (once, counted by `FrameDownloadCounter`). So an encoder
/// that works on the device can take the picture where it is, and serve the rest (raw formats,
/// pictures in system memory) as it sees fit.
///
/// Not thread-safe, like `PictureDecoder`: each user (a session's encode queue, the command
/// line's decode loop) gets its own from the factory and keeps it, so its buffers are reused
/// from one picture to the next.
public protocol PictureEncoding: AnyObject {
    /// Which encoder this is and why it serves, for status reports. It may change over the
    /// encoder's life (one that lost its device and went on without it says so), so users read
    /// it after an encode.
    var identity: PictureEncoderIdentity { get }
    /// `frame` as `options` ask. Throws `.invalidOptions` for options out of range or an output
    /// above the size limit, `.encodeFailed` for a picture that cannot be encoded (its download
    /// failed, its format is unknown), `.allocationFailed` when memory ran out.
    func encode(_ frame: DecodedFrame, _ options: PictureOptions) throws(ImagingError) -> EncodedPicture
}

/// What an encoder says of itself.
public struct PictureEncoderIdentity: Sendable, Equatable {
    /// Short and stable, for JSON values and metric labels: `turbojpeg`.
    public var name: String
    /// Why this encoder serves, for people: what was chosen over what.
    public var reason: String

    public init(name: String, reason: String) {
        self.name = name
        self.reason = reason
    }
}

/// Where picture encoders come from: one for each user that encodes (a session's encode queue,
/// `frametap decode`, the benchmark). Made once at start-up, so the choice it makes (which
/// library loads, which device answers) is made once too.
public protocol PictureEncoderFactory: Sendable {
    /// Which encoder the factory's encoders are and why they serve, as chosen at start-up (an
    /// encoder may later say otherwise: see `PictureEncoding.identity`).
    var identity: PictureEncoderIdentity { get }
    /// A new encoder, or `.allocationFailed` when none can be made.
    func makeEncoder() throws(ImagingError) -> any PictureEncoding
}

/// TurboJPEG and libswscale on the CPU (`TurboJPEGEncoder`).
public struct TurboJPEGEncoderFactory: PictureEncoderFactory {
    /// Why it serves when nothing else was tried.
    public static let defaultReason = "the CPU encoder, the only one built in"

    /// Why these encoders serve, as each of them reports it.
    public let reason: String

    public init(reason: String = Self.defaultReason) {
        self.reason = reason
    }

    public var identity: PictureEncoderIdentity { PictureEncoderIdentity(name: TurboJPEGEncoder.name, reason: reason) }

    public func makeEncoder() throws(ImagingError) -> any PictureEncoding {
        try TurboJPEGEncoder(reason: reason)
    }
}

/// Which picture encoder a server uses (`frametap serve --encoder`).
public enum PictureEncoderChoice: String, Sendable, CaseIterable {
    /// nvJPEG when libnvjpeg, the NVIDIA driver and a CUDA device are all there, else TurboJPEG.
    case auto
    /// nvJPEG, or TurboJPEG with the reason when it cannot serve (never a refusal to start:
    /// pictures are served either way).
    case nvjpeg
    /// TurboJPEG on the CPU alone.
    case turbojpeg
}

/// The one place FrameTap chooses how it encodes pictures.
public enum PictureEncoders {
    /// The factory the server (`SessionServices.encoderFactory`), `frametap decode` and
    /// `frametap-bench` use; only tests pass in others.
    public static func standard(_ choice: PictureEncoderChoice = .auto) -> any PictureEncoderFactory {
        choose(choice, platform: NvJPEGPlatform())
    }

    /// The choice on `platform`, with the reason each encoder will report.
    static func choose(_ choice: PictureEncoderChoice, platform: any DeviceJPEGPlatform) -> any PictureEncoderFactory {
        switch choice {
        case .turbojpeg:
            return TurboJPEGEncoderFactory(reason: "chosen by --encoder turbojpeg")
        case .auto, .nvjpeg:
            let asked = choice == .nvjpeg ? "--encoder nvjpeg" : "--encoder auto"
            if let unavailable = platform.unavailability {
                return TurboJPEGEncoderFactory(reason: "\(asked): nvJPEG cannot serve: \(unavailable)")
            }
            return NvJPEGEncoderFactory(
                platform: platform,
                reason: "\(asked): \(platform.description); JPEG of CUDA-decoded 8-bit 4:2:0 pictures at their own "
                    + "size is encoded on the GPU, everything else by TurboJPEG")
        }
    }
}
