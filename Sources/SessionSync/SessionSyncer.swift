import FoundationEssentials
import FrameTapAPI
import Logging
import ServeOptions
import Sessions

/// `frametap sync`: the sessions a configuration file declares (`sessions:`, the format of
/// `frametap serve --config`), kept in place through a gateway that routes by session id.
///
/// Each pass, top to bottom:
/// 1. read the file again (a broken file skips the pass: nothing is deleted on its account);
/// 2. `PUT /sessions/{id}` each declared session through the gateway, marked with this syncer's
///    owner. A session that exists with the same definition answers 200 and goes on untouched; one
///    whose instance died is created (201) on the instance the gateway routes it to now;
/// 3. list `GET /sessions` on every instance (`--instances`; else through the gateway) and delete
///    what the plan says (`SyncPlan`): sessions of this owner the file no longer declares, and
///    second copies of declared ones.
///
/// It keeps nothing between passes but its settings: what it created, it recognises by the owner
/// in each session's status. A failing request is logged and tried again next pass.
public final class SessionSyncer: Sendable {
    public struct Settings: Sendable {
        public var configurationPath: String
        /// What the file's `${NAME}` reads.
        public var environment: [String: String]
        public var gateway: HTTPEndpoint
        /// nil: list and delete through the gateway (enough for one instance behind it).
        public var instances: InstanceDiscovery?
        public var owner: SessionOwner
        public var client: SyncClient

        public init(
            configurationPath: String, environment: [String: String], gateway: HTTPEndpoint, instances: InstanceDiscovery?,
            owner: SessionOwner, client: SyncClient
        ) {
            self.configurationPath = configurationPath
            self.environment = environment
            self.gateway = gateway
            self.instances = instances
            self.owner = owner
            self.client = client
        }
    }

    /// What one pass did.
    public struct Report: Sendable {
        public var declared = 0
        /// Created by this pass's `PUT` (201): new, or back after its instance was lost.
        public var created: [SessionID] = []
        /// Answered 200: there already, the definition applied (unchanged ones untouched).
        public var kept: [SessionID] = []
        public var deleted: [SyncPlan.Deletion] = []
        /// Everything that went wrong, in words; the pass went on past each.
        public var failures: [String] = []

        public var succeeded: Bool { failures.isEmpty }
    }

    public let settings: Settings
    let logger: Logger

    public init(settings: Settings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    /// The file's sessions, read and checked as `frametap serve --config` reads them.
    public func declaredSessions() throws(SyncError) -> [DeclaredSession] {
        do {
            return try ConfigurationFile(path: settings.configurationPath, environment: settings.environment).sessions
        } catch {
            throw SyncError(error.description)
        }
    }

    public func runPass() -> Report {
        var report = Report()
        let declared: [DeclaredSession]
        do {
            declared = try declaredSessions()
        } catch {
            report.failures.append("configuration file not applied: \(error.message)")
            log(report)
            return report
        }
        report.declared = declared.count
        let placed = place(declared, into: &report)
        let listings = list(into: &report)
        let plan = SyncPlan(
            owner: settings.owner, declared: Set(declared.map(\.id)), placed: placed, listings: listings)
        for deletion in plan.deletions { delete(deletion, into: &report) }
        log(report)
        return report
    }

    // MARK: - The steps

    /// `PUT`s every declared session through the gateway; returns the `createdAt` each answered
    /// with. A gateway that cannot be reached ends this step: the rest would wait as long.
    private func place(_ declared: [DeclaredSession], into report: inout Report) -> [SessionID: String] {
        var placed: [SessionID: String] = [:]
        for (index, session) in declared.enumerated() {
            var options = session.options
            options.owner = .some(settings.owner)
            let answer: SyncClient.Answer
            do {
                answer = try settings.client.send(
                    "PUT", "/sessions/\(session.id)", to: settings.gateway, json: WireJSON.bytes(SessionOptionsJSON(options)))
            } catch {
                report.failures.append("gateway unreachable, \(declared.count - index) session(s) not placed: \(error.message)")
                break
            }
            switch answer.status {
            case 200, 201:
                guard let status = try? JSONDecoder().decode(StatusAnswer.self, from: Data(answer.body)) else {
                    report.failures.append("PUT \(session.id): the answer is not a session's status")
                    continue
                }
                placed[session.id] = status.createdAt
                if answer.status == 201 { report.created.append(session.id) } else { report.kept.append(session.id) }
            default:
                report.failures.append("PUT \(session.id): \(Self.problem(answer))")
            }
        }
        return placed
    }

    /// Every instance's sessions (those that answered).
    private func list(into report: inout Report) -> [(instance: SyncInstance, sessions: [ListedSession])] {
        var instances: [SyncInstance]
        if let discovery = settings.instances {
            let (found, failures) = discovery.resolve()
            report.failures += failures.map { "instances: \($0.message)" }
            instances = found.map { SyncInstance($0, direct: true) }
        } else {
            instances = [SyncInstance(settings.gateway, direct: false)]
        }
        var listings: [(instance: SyncInstance, sessions: [ListedSession])] = []
        for instance in instances {
            do {
                let answer = try settings.client.send("GET", "/sessions", to: instance.endpoint)
                guard answer.status == 200 else {
                    report.failures.append("GET \(instance)/sessions: \(Self.problem(answer))")
                    continue
                }
                let list = try? JSONDecoder().decode(ListAnswer.self, from: Data(answer.body))
                guard let list else {
                    report.failures.append("GET \(instance)/sessions: the answer is not a session list")
                    continue
                }
                listings.append((instance, list.sessions.compactMap(\.listed)))
            } catch {
                report.failures.append(error.message)
            }
        }
        return listings
    }

    private func delete(_ deletion: SyncPlan.Deletion, into report: inout Report) {
        do {
            let answer = try settings.client.send("DELETE", "/sessions/\(deletion.id)", to: deletion.instance.endpoint)
            // 404: gone already (deleted by someone else, or its instance was restarted).
            guard answer.status == 204 || answer.status == 404 else {
                report.failures.append("DELETE \(deletion.instance)/sessions/\(deletion.id): \(Self.problem(answer))")
                return
            }
            report.deleted.append(deletion)
        } catch {
            report.failures.append(error.message)
        }
    }

    /// A pass that changed nothing says so at debug level only: one line per change otherwise,
    /// and each failure as a warning.
    private func log(_ report: Report) {
        for id in report.created {
            logger.info("session placed", metadata: ["session": "\(id)", "gateway": "\(settings.gateway)"])
        }
        for deletion in report.deleted {
            logger.info(
                "session deleted",
                metadata: [
                    "session": "\(deletion.id)", "instance": "\(deletion.instance)", "reason": "\(deletion.reason.rawValue)",
                ])
        }
        for failure in report.failures {
            logger.warning("sync failed in part; next pass retries", metadata: ["reason": "\(failure)"])
        }
        logger.debug(
            "sync pass",
            metadata: [
                "declared": "\(report.declared)", "created": "\(report.created.count)", "kept": "\(report.kept.count)",
                "deleted": "\(report.deleted.count)", "failures": "\(report.failures.count)",
            ])
    }

    /// A refusal's status with its problem's code and detail when it has them.
    static func problem(_ answer: SyncClient.Answer) -> String {
        let problem = try? JSONDecoder().decode(ProblemAnswer.self, from: Data(answer.body))
        let words = [problem?.code, problem?.detail].compactMap { $0 }.joined(separator: ": ")
        return "HTTP \(answer.status)" + (words.isEmpty ? "" : " \(words)")
    }

    // What is read of the published JSON (openapi.yaml: SessionStatus, SessionList, Problem).

    private struct StatusAnswer: Decodable {
        let createdAt: String
    }

    private struct ListAnswer: Decodable {
        let sessions: [Entry]

        struct Entry: Decodable {
            let id: String
            let owner: String?
            let createdAt: String

            var listed: ListedSession? {
                guard let id = try? SessionID(id) else { return nil }
                return ListedSession(id: id, owner: owner.flatMap { try? SessionOwner($0) }, createdAt: createdAt)
            }
        }
    }

    private struct ProblemAnswer: Decodable {
        let code: String?
        let detail: String?
    }
}
