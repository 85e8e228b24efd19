import Containers
import Ingest
import SessionCatalog
import Sessions
import Testing

@Suite(.timeLimit(.minutes(10)))
struct DeclarationPlanTests {
    @Test func placeholder() {}
}
