/// The two kinds of decoding hardware FrameTap drives through libavcodec.
public enum HardwareDeviceKind: String, Sendable, CaseIterable {
    /// An NVIDIA GPU through the CUDA driver; libavcodec decodes on its NVDEC engine.
    case cuda
    /// A DRM render node through libva (Intel, AMD).
    case vaapi

    /// "CUDA" or "VA-API", for messages.
    public var displayName: String {
        switch self {
        case .cuda: "CUDA"
        case .vaapi: "VA-API"
        }
    }

    /// The decoding engine, for messages about what it can decode: "NVDEC" or "VA-API".
    public var engineName: String {
        switch self {
        case .cuda: "NVDEC"
        case .vaapi: "VA-API"
        }
    }

    public var backend: DecoderBackend {
        switch self {
        case .cuda: .cuda
        case .vaapi: .vaapi
        }
    }
}

/// One hardware device: a CUDA device ordinal or a DRM render node.
public struct HardwareDeviceID: Hashable, Sendable, CustomStringConvertible {
    public let kind: HardwareDeviceKind
    /// The device ordinal for CUDA ("0"), the node's path for VA-API. This is the string
    /// `av_hwdevice_ctx_create` takes.
    public let address: String

    public static func cuda(_ ordinal: Int) -> HardwareDeviceID {
        HardwareDeviceID(kind: .cuda, address: String(ordinal))
    }

    public static func renderNode(_ path: String) -> HardwareDeviceID {
        HardwareDeviceID(kind: .vaapi, address: path)
    }

    /// `cuda:0`, or the render node's path: the spelling `--hw-devices` takes.
    public var description: String {
        switch kind {
        case .cuda: "cuda:\(address)"
        case .vaapi: address
        }
    }

    public var cudaOrdinal: Int? { kind == .cuda ? Int(address) : nil }
}

/// Which hardware devices decoders may use, as `--hw-devices` spells them:
/// `cuda:0,cuda:1,/dev/dri/renderD128`; `cuda` means `cuda:0`, `vaapi` every `/dev/dri/renderD*`.
/// Order matters only between devices with equal load (see `HardwareDevicePool`).
public struct HardwareDeviceList: Sendable, Equatable, CustomStringConvertible {
    public enum Entry: Sendable, Equatable {
        case device(HardwareDeviceID)
        /// `vaapi`: whatever render nodes exist when a decoder is opened.
        case everyRenderNode
    }

    public let entries: [Entry]

    /// The largest CUDA ordinal accepted; far beyond any machine, small enough to catch typos
    /// such as a PCI bus id.
    public static let maxCUDAOrdinal = 255
    public static let syntax =
        "a comma-separated list of cuda, cuda:N, vaapi or render node paths such as /dev/dri/renderD128"

    public init(_ entries: [Entry]) {
        self.entries = entries
    }

    /// Parses `--hw-devices`. Strict: an empty entry, an unknown word, a bad ordinal, a relative
    /// path or a device listed twice is an `.invalidOptions` error that says which entry and why.
    public init(parsing text: String) throws(DecodeError) {
        let trimmed = text.trimmingWhitespace()
        guard !trimmed.isEmpty else {
            throw DecodeError(.invalidOptions, "the hardware device list is empty; expected \(Self.syntax)")
        }
        var entries: [Entry] = []
        for (index, raw) in trimmed.split(separator: ",", omittingEmptySubsequences: false).enumerated() {
            let item = String(raw).trimmingWhitespace()
            let entry = try Self.parseEntry(item, position: index + 1)
            if entries.contains(entry) {
                throw DecodeError(.invalidOptions, "hardware device \"\(item)\" is listed twice")
            }
            entries.append(entry)
        }
        self.entries = entries
    }

    private static func parseEntry(_ item: String, position: Int) throws(DecodeError) -> Entry {
        if item.isEmpty {
            throw DecodeError(
                .invalidOptions, "hardware device entry \(position) is empty (a doubled or trailing comma?)")
        }
        if item == "cuda" { return .device(.cuda(0)) }
        if item == "vaapi" { return .everyRenderNode }
        if item.hasPrefix("cuda:") {
            let digits = item.dropFirst("cuda:".count)
            guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let ordinal = Int(digits),
                ordinal <= maxCUDAOrdinal
            else {
                throw DecodeError(
                    .invalidOptions,
                    "hardware device \"\(item)\": a CUDA device is cuda:N with N a device number 0...\(maxCUDAOrdinal)")
            }
            return .device(.cuda(ordinal))
        }
        if item.hasPrefix("/") {
            guard !item.hasSuffix("/"), !item.contains(where: \.isWhitespace) else {
                throw DecodeError(.invalidOptions, "hardware device \"\(item)\" is not a render node path")
            }
            return .device(.renderNode(item))
        }
        throw DecodeError(.invalidOptions, "unknown hardware device \"\(item)\": expected \(syntax)")
    }

    /// The devices of `kind`, in list order, with `vaapi` expanded to `renderNodes()`.
    public func devices(of kind: HardwareDeviceKind, renderNodes: () -> [String]) -> [HardwareDeviceID] {
        var devices: [HardwareDeviceID] = []
        for entry in entries {
            switch entry {
            case .device(let device) where device.kind == kind:
                devices.append(device)
            case .everyRenderNode where kind == .vaapi:
                devices += renderNodes().map(HardwareDeviceID.renderNode)
            default:
                break
            }
        }
        var seen = Set<HardwareDeviceID>()
        return devices.filter { seen.insert($0).inserted }
    }

    public var description: String {
        entries.map {
            switch $0 {
            case .device(let device): device.description
            case .everyRenderNode: "vaapi"
            }
        }.joined(separator: ",")
    }
}

extension StringProtocol {
    /// Without leading and trailing whitespace (what Foundation's trimmingCharacters(in:) does,
    /// without Foundation: the binary links only FoundationEssentials, not the ICU data).
    public func trimmingWhitespace() -> String {
        var slice = Substring(self)
        while let first = slice.first, first.isWhitespace { slice.removeFirst() }
        while let last = slice.last, last.isWhitespace { slice.removeLast() }
        return String(slice)
    }
}
