import Containers
import Ingest

/// What a session's pull reports, as the session's events and metrics, and to its on-demand
/// connection (requests may wait for it).
struct SessionPullObserver: PullObserver {
    /// The source's URL with its credentials left out.
    let source: String
    let context: SessionContext
    let connection: OnDemandConnection

    func pullConnected(format: String, reconnects: Int) {
        connection.connected()
        context.events.emit(.sourceConnected) { details in
            details.url = source
            details.container = format
            details.reconnects = reconnects
        }
    }

    func pullReconnecting() {
        context.metrics.recordSourceReconnect()
    }

    func pullLost(_ error: ContainerError, reconnects: Int, retryIn: Duration) {
        connection.failed(error, retryIn: retryIn)
        context.metrics.recordError(code: error.code.rawValue)
        context.events.emit(.sourceLost) { details in
            details.url = source
            details.code = error.code.rawValue
            details.message = error.message
            details.reconnects = reconnects
        }
    }

    func pullReleased() {
        context.events.emit(.sourceReleased) { details in
            details.url = source
            details.reason = "idle"
        }
    }
}
