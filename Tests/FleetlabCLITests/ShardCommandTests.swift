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

    @Test("scripts/run-shards --jobs 2 runs three shards and merges them into the whole run's fleet; a bad --jobs is refused")
    func runShardsWithJobs() async throws {
        let dir = TestPaths.scratchDirectory("run-shards-jobs")
        let scenario = try writeScenario(quickScenario, in: dir, name: "run-shards-jobs.yaml")
        let script = TestPaths.packageRoot.appendingPathComponent("scripts/run-shards").path
        let out = TestPaths.packageRoot.appendingPathComponent("runs/run-shards-jobs-shards")
        defer { try? FileManager.default.removeItem(at: out) }
        let environment = ["FLEETLAB": TestPaths.fleetlabExecutable.path]
        let run = { @Sendable (arguments: [String]) async throws -> CommandRunner.Result in
            try await cpuBound {
                try CommandRunner.wait(for: CommandRunner.start([script] + arguments, environment: environment, executable: URL(fileURLWithPath: "/bin/bash")))
            }
        }
        let sharded = try await run(["--jobs", "2", "3", scenario])
        #expect(sharded.status == 0, "\(sharded.stderr)")
        #expect(sharded.stdout.contains("fleetlab merge quick — 3 shards — PASSED"), "\(sharded.stdout)")
        let whole = try await CommandRunner.fleetlabAsync(["simulate", scenario, "--out", "whole", "--quiet"], in: dir)
        #expect(whole.status == 0, "\(whole.stderr)")
        var digests: [String] = []
        for file in [dir.appendingPathComponent("whole/results.sqlite").path, out.appendingPathComponent("merged/results.sqlite").path] {
            digests.append(try await CommandRunner.fleetlabAsync(["digest", "--fleet", file]).stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        #expect(digests[0].count == 64 && digests[0] == digests[1])

        let refused = try await run(["--jobs", "0", "3", scenario])
        #expect(refused.status == 2 && refused.stderr.contains("usage: scripts/run-shards [--jobs J] N SCENARIO"), "\(refused.stderr)")
    }

    @Test("scripts/run-shards --jobs J never runs more than J shards at once, and names a shard that failed")
    func runShardsPool() async throws {
        let dir = TestPaths.scratchDirectory("run-shards-pool")
        // A stand-in for fleetlab that records how many of its `simulate`s run at once.
        let fake = dir.appendingPathComponent("fake-fleetlab")
        try """
        #!/bin/bash
        dir=$(dirname "$0")
        if [ "$1" = simulate ]; then
          ( flock 9; n=$(( $(cat "$dir/running" 2>/dev/null || echo 0) + 1 )); echo $n > "$dir/running"; echo $n >> "$dir/peaks" ) 9>"$dir/lock"
          sleep 0.3
          ( flock 9; echo $(( $(cat "$dir/running") - 1 )) > "$dir/running" ) 9>"$dir/lock"
          [ "$4" = "$FAIL_SHARD" ] && exit 1  # simulate SCENARIO --shard I/N …
          exit 0
        fi
        echo merged
        """.write(to: fake, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: fake.path)
        let script = TestPaths.packageRoot.appendingPathComponent("scripts/run-shards").path
        defer { try? FileManager.default.removeItem(at: TestPaths.packageRoot.appendingPathComponent("runs/pool-shards")) }
        let run = { @Sendable (jobs: String, fail: String) async throws -> CommandRunner.Result in
            try await cpuBound {
                try CommandRunner.wait(for: CommandRunner.start([script, "--jobs", jobs, "5", "pool.yaml"], environment: ["FLEETLAB": fake.path, "FAIL_SHARD": fail],
                                                                executable: URL(fileURLWithPath: "/bin/bash")))
            }
        }
        let peaks = { () throws -> [Int] in
            defer { try? FileManager.default.removeItem(at: dir.appendingPathComponent("peaks")) }
            return try String(contentsOf: dir.appendingPathComponent("peaks"), encoding: .utf8).split(separator: "\n").compactMap { Int($0) }
        }
        let two = try await run("2", "none")
        #expect(two.status == 0 && two.stdout.contains("merged"), "\(two.stderr)")
        let counted = try peaks()
        #expect(counted.count == 5 && counted.max() == 2, "\(counted)")
        let failed = try await run("3", "1/5")
        #expect(failed.status == 1 && failed.stderr.contains("shard 1/5 failed (exit 1)") && !failed.stdout.contains("merged"), "\(failed.stderr)")
        #expect(try peaks().max() == 3)
    }
}
