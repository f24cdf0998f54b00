import Foundation
import Testing
import LabTestSupport

@Suite("fleetlab vectors and bench crypto")
struct ChatCommandTests {
    @Test("e2e-crypto writes the published file byte for byte; --check passes it and fails an altered copy with status 3")
    func e2eCrypto() async throws {
        let dir = TestPaths.scratchDirectory()
        let out = dir.appendingPathComponent("v.json").path
        let written = try await CommandRunner.fleetlabAsync(["vectors", "e2e-crypto", "--out", out])
        #expect(written.status == 0, "\(written.stderr)")
        let published = TestPaths.packageRoot.appendingPathComponent("docs/vectors/e2e-crypto-v1.json").path
        #expect(FileManager.default.contents(atPath: out) == FileManager.default.contents(atPath: published))
        #expect(try await CommandRunner.fleetlabAsync(["vectors", "e2e-crypto", "--check", published]).status == 0)
        var text = try String(contentsOfFile: out, encoding: .utf8)
        let sk = try #require(text.range(of: #""sk": ""#))
        text.replaceSubrange(sk.upperBound..<text.index(sk.upperBound, offsetBy: 4), with: "abcd")
        try text.write(toFile: out, atomically: true, encoding: .utf8)
        let failed = try await CommandRunner.fleetlabAsync(["vectors", "e2e-crypto", "--check", out])
        #expect(failed.status == 3 && failed.stderr.contains("x3dh[0]: sk differs"), "\(failed.stderr)")
        let missing = try await CommandRunner.fleetlabAsync(["vectors", "e2e-crypto", "--check", dir.appendingPathComponent("none.json").path])
        #expect(missing.status == 2 && missing.stderr.contains("cannot read"))
    }

    @Test("bench crypto measures each operation and its bare calls in one run; bad options are exit 2")
    func benchCrypto() async throws {
        let result = try await CommandRunner.fleetlabAsync(["bench", "crypto", "--operations", "200", "--rounds", "1"])
        #expect(result.status == 0, "\(result.stderr)")
        for row in ["X3DH handshake", "ratchet encrypt + decrypt", "group encrypt + sign", "group verify + decrypt"] {
            #expect(result.stdout.contains(row))
        }
        #expect(try await CommandRunner.fleetlabAsync(["bench", "crypto", "--bytes", "5000"]).status == 2)
    }
}
