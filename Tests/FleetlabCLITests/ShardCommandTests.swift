import Foundation
import Testing
import LabStore
import LabTestSupport

@Suite("fleetlab simulate --shard and fleetlab merge")
struct ShardCommandTests {
    @Test("two shards merged give the whole run's fleet digest, a dashboard and a summary; --shard and merge refuse bad input")
    func shardAndMerge() async throws {
        let dir = TestPaths.scratchDirectory("shard-cli")
        let scenario = try writeScenario(quickScenario, in: dir)
        let whole = try await CommandRunner.fleetlabAsync(["simulate", scenario, "--out", "whole", "--quiet"], in: dir)
        #expect(whole.status == 0, "\(whole.stderr)")
        for index in 0..<2 {
            let shard = try await CommandRunner.fleetlabAsync(["simulate", scenario, "--shard", "\(index)/2", "--quiet"], in: dir)
            #expect(shard.status == 0, "\(shard.stderr)")
            #expect(shard.stdout.contains("shard \(index)/2 of the fleet"))
            #expect(shard.stdout.contains("--shard \(index)/2"), "the replay command names the shard")
        }
        let merge = try await CommandRunner.fleetlabAsync(["merge", "merged/results.sqlite", "runs/quick-shard-0-of-2/results.sqlite",
                                                           "runs/quick-shard-1-of-2/results.sqlite"], in: dir)
        #expect(merge.status == 0, "\(merge.stderr)")
        #expect(merge.stdout.contains("fleetlab merge quick — 2 shards — PASSED"))
        #expect(merge.stdout.contains("devices       50 (shard 0/2 25, shard 1/2 25)"))
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("merged/dashboard.html").path))
        var digests: [String] = []
        for file in ["whole/results.sqlite", "merged/results.sqlite"] {
            let digest = try await CommandRunner.fleetlabAsync(["digest", "--fleet", file], in: dir)
            digests.append(digest.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        #expect(digests[0].count == 64 && digests[0] == digests[1])

        let missing = try await CommandRunner.fleetlabAsync(["merge", "m2/results.sqlite", "runs/quick-shard-0-of-2/results.sqlite"], in: dir)
        #expect(missing.status == 2 && missing.stderr.contains("missing shard 1/2"), "\(missing.stderr)")
        let badShard = try await CommandRunner.fleetlabAsync(["simulate", scenario, "--shard", "2/2", "--quiet"], in: dir)
        #expect(badShard.status == 2 && badShard.stderr.contains("expected I/N"))
        let chat = try writeScenario("name: talk\nseed: 1\nduration: 1h\ndevices:\n  - {name: phones, count: 40, stacks: [chat]}\nchat: {groups: 2}\n",
                                     in: dir, name: "chat.yaml")
        let refused = try await CommandRunner.fleetlabAsync(["simulate", chat, "--shard", "0/2", "--quiet"], in: dir)
        #expect(refused.status == 2 && refused.stderr.contains("runs chat"), "\(refused.stderr)")
    }
}
