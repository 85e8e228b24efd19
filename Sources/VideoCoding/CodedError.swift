/// An error with a stable, machine-readable `code` and a message for people: the one shape the
/// error types of each layer share (`BitstreamError`, `DecodeError`, `ImagingError`,
/// `ContainerError`). Each layer defines only its codes; a code's raw value is what clients
/// match on, so it must never be renamed.
public struct CodedError<StableCode>: Error, Sendable, Equatable, CustomStringConvertible
where StableCode: RawRepresentable, StableCode.RawValue == String, StableCode: Sendable, StableCode: Equatable {
    /// Spelled `BitstreamError.Code`, `DecodeError.Code`, ... where a layer names its codes.
    public typealias Code = StableCode

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
