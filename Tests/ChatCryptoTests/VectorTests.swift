import Foundation
import Testing
import LabKernel
import LabTestSupport
@testable import ChatCrypto

@Suite("Chat crypto: published vectors")
struct VectorTests {
    static let path = TestPaths.packageRoot.appendingPathComponent("docs/vectors/e2e-crypto-v1.json").path

    @Test("docs/vectors/e2e-crypto-v1.json is what `fleetlab vectors e2e-crypto` writes, and every case replays from its seeds")
    func fileMatches() throws {
        let text = try String(contentsOfFile: Self.path, encoding: .utf8)
        let same = try text == CryptoVectors.fileText()
        #expect(same, "regenerate with: swift run fleetlab vectors e2e-crypto")
        let file = try JSONValue.parse(text)
        #expect(CryptoVectors.verify(file) == [])
    }

    @Test("the file covers what the profile asks: X3DH with and without a one-time key, a ratchet that turns twice with a late message, four group messages")
    func coverage() throws {
        let file = try JSONValue.parse(String(contentsOfFile: Self.path, encoding: .utf8))
        let x3dh = try #require(file["x3dh"]?.arrayValue)
        #expect(x3dh.contains { $0["bob_one_time_prekey_seed"] == .null } && x3dh.contains { $0["bob_one_time_prekey_seed"]?.stringValue != nil })
        let messages = try #require(file["double_ratchet"]?.arrayValue?.first?["messages"]?.arrayValue)
        #expect(messages.count >= 6)
        let senders = messages.compactMap { $0["from"]?.stringValue }
        #expect(zip(senders, senders.dropFirst()).filter { $0 != $1 }.count >= 2)
        let orders = messages.compactMap { $0["deliver_order"]?.numberValue }
        #expect(orders != orders.sorted(), "at least one message is delivered out of order")
        #expect((file["sender_keys"]?.arrayValue?.first?["messages"]?.arrayValue?.count ?? 0) >= 4)
    }

    @Test("the checker catches a changed wire, a changed key and a moved ratchet seed")
    func checkerFails() throws {
        let text = try String(contentsOfFile: Self.path, encoding: .utf8)
        let file = try JSONValue.parse(text)
        func altered(_ edit: (inout [String: JSONValue]) -> Void) -> JSONValue {
            var object = file.objectValue!
            edit(&object)
            return .object(object)
        }
        let wire = altered { o in
            var ratchet = o["double_ratchet"]!.arrayValue![0].objectValue!
            var messages = ratchet["messages"]!.arrayValue!
            var m = messages[4].objectValue!
            let hex = m["wire"]!.stringValue!
            m["wire"] = .string(String(hex.dropLast()) + (hex.last == "0" ? "1" : "0"))
            messages[4] = .object(m)
            ratchet["messages"] = .array(messages)
            o["double_ratchet"] = [.object(ratchet)]
        }
        #expect(CryptoVectors.verify(wire).contains("double_ratchet[0].messages[4]: the wire differs"))
        let key = altered { o in
            var x = o["x3dh"]!.arrayValue!
            var first = x[0].objectValue!
            first["sk"] = .string(String(repeating: "00", count: 32))
            x[0] = .object(first)
            o["x3dh"] = .array(x)
        }
        #expect(CryptoVectors.verify(key).contains("x3dh[0]: sk, ad or the signature differ"))
        let group = altered { o in
            var s = o["sender_keys"]!.arrayValue![0].objectValue!
            s["chain_key"] = .string(String(repeating: "11", count: 32))
            o["sender_keys"] = [.object(s)]
        }
        #expect(!CryptoVectors.verify(group).isEmpty)
        let moved = altered { o in
            var ratchet = o["double_ratchet"]!.arrayValue![0].objectValue!
            var messages = ratchet["messages"]!.arrayValue!.map { $0.objectValue! }
            messages[3]["new_ratchet_seed"] = messages[2]["new_ratchet_seed"]
            messages[2]["new_ratchet_seed"] = .null
            ratchet["messages"] = .array(messages.map { .object($0) })
            o["double_ratchet"] = [.object(ratchet)]
        }
        #expect(!CryptoVectors.verify(moved).isEmpty)
        #expect(CryptoVectors.verify(["profile": "other"]) == ["profile is not fleetlab-e2e-v1"])
    }
}
