import Containers
import Ingest

/// What the tests' consumer refuses an input with: this layer's errors, a container's, or its own.
enum Refusal: IngestFailure {
    case input(IngestError)
    case container(ContainerError)
    case consumer(String)

    init(_ error: IngestError) { self = .input(error) }
    init(_ error: ContainerError) { self = .container(error) }
}
