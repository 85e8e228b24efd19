import Containers
import Ingest

/// What a session's pull reports, as the session's events and metrics.
struct SessionPullObserver: PullObserver {
    /// The source's URL with its credentials left out.
    let source: String
    let context: SessionContext

    func pullConnected(format: String, reconnects: Int) {
        context.events.emit(.sourceConnected) { details in
            details.url = source
            details.container = format
            details.reconnects = reconnects
        }
    }

    func pullReconnecting() {
        context.metrics.recordSourceReconnect()
    }

    func pullLost(_ error: ContainerError, reconnects: Int) {
        context.metrics.recordError(code: error.code.rawValue)
        context.events.emit(.sourceLost) { details in
            details.url = source
            details.code = error.code.rawValue
            details.message = error.message
            details.reconnects = reconnects
        }
    }
}
