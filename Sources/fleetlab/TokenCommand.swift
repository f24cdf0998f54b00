import ArgumentParser
import Foundation
import LabKernel
import Live

struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Mint a bearer token for the agent runtime of `fleetlab serve`.",
        discussion: """
        The token is an HS256 JWT signed with the key under --data (the one `fleetlab serve` \
        uses), naming the tenant (app_id) and the principal (user_id). Send it as \
        `Authorization: Bearer <token>` and as the socket's access_token.
        """)

    @Option(help: "The tenant (app_id).")
    var app: String

    @Option(help: "The principal (user_id).")
    var user: String

    @Option(help: "Directory of the servers' data (the key lives there).")
    var data = ".fleetlab-data"

    @Option(help: "How long the token is valid (e.g. 1h, 30d).")
    var ttl = "30d"

    func run() throws {
        for (name, value) in [("--app", app), ("--user", user)] {
            guard !value.isEmpty, value.utf8.count <= 128, !value.contains("/"), !value.contains("|") else {
                throw CLIFailure.badInput("\(name) is 1 to 128 characters without '/' or '|'")
            }
        }
        guard let lifetime = TimeSpan(ttl), lifetime > .zero, lifetime <= .days(3_650) else {
            throw CLIFailure.badInput("--ttl takes a duration such as 1h or 30d (at most 10 years), got '\(ttl)'")
        }
        do {
            try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
            print(try AgentRuntimeLiveServer.mint(app: app, user: user, dataDirectory: data, lifetime: lifetime))
        } catch {
            throw CLIFailure.badInput("cannot read or create the token key under \(data): \(error)")
        }
    }
}
