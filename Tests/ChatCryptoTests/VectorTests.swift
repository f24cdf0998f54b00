import CSodium
import Foundation
import LabCrypto
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
        #expect(CryptoVectors.verify(key).contains("x3dh[0]: sk differs"))
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

    /// What a third party does with the intermediates: every ciphertext in the file is
    /// libsodium's XChaCha20-Poly1305 of the plaintext under the published key, nonce and
    /// associated data, passed as separate buffers; key and nonce are HKDF's 56 bytes of
    /// the message key split at 32; every signature verifies.
    @Test("the intermediates replay with bare libsodium calls: HKDF split at 32, AEAD with key and nonce apart")
    func intermediatesWithBareLibsodium() throws {
        let file = try JSONValue.parse(String(contentsOfFile: Self.path, encoding: .utf8))
        _ = sodium_init()
        func hex(_ value: JSONValue?) throws -> [UInt8] { try #require(value?.stringValue.flatMap { [UInt8](hex: $0) }) }
        func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], ad: [UInt8]) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: plaintext.count + 16)
            var written: UInt64 = 0
            _ = crypto_aead_xchacha20poly1305_ietf_encrypt(&out, &written, plaintext, UInt64(plaintext.count), ad, UInt64(ad.count), nil, nonce, key)
            return out
        }
        func hkdf(_ ikm: [UInt8], _ info: String) -> [UInt8] { HKDF.derive(salt: [UInt8](repeating: 0, count: 32), ikm: ikm, info: Array(info.utf8), count: 56) }
        var checked = 0
        for m in file["double_ratchet"]?.arrayValue?.first?["messages"]?.arrayValue ?? [] {
            let wire = try hex(m["wire"]), key = try hex(m["aead_key"]), nonce = try hex(m["aead_nonce"])
            let messageKey = try hex(m["message_key"]), header = try hex(m["header"]), ad = try hex(m["ad"])
            #expect(hkdf(messageKey, "fleetlab Message v1") == key + nonce)
            #expect(Array(wire[1..<41]) == header && Array(ad.suffix(40)) == header)
            #expect(Array(wire[41...]) == seal(Array((m["plaintext"]?.stringValue ?? "").utf8), key: key, nonce: nonce, ad: ad))
            checked += 1
        }
        let group = try #require(file["sender_keys"]?.arrayValue?.first)
        for m in group["messages"]?.arrayValue ?? [] {
            let wire = try hex(m["wire"]), key = try hex(m["aead_key"]), nonce = try hex(m["aead_nonce"])
            let seed = try hex(m["message_seed"]), ad = try hex(m["ad"])
            #expect(hkdf(seed, "fleetlab Group v1") == key + nonce)
            #expect(ad == Array((group["channel_id"]?.stringValue ?? "").utf8))
            #expect(Array(wire[5..<(wire.count - 64)]) == seal(Array((m["plaintext"]?.stringValue ?? "").utf8), key: key, nonce: nonce, ad: ad))
            checked += 1
        }
        #expect(checked == 13)
    }
}
