import Testing
import LabKernel
import LabTestSupport
@testable import SecureChatServer

/// What the chat server keeps for the whole run is held once where two rows name the same
/// thing: memory, not behaviour (the answers are checked by the other suites), so what is
/// checked is that the rows share one copy.
@Suite("Chat server: what rows repeat is kept once")
struct SharedStorageTests {
    @Test("a login's refresh tokens, rotated and active, share one record of whose they are; a rotated one names its successor by its hash")
    func tokensShareTheirLogin() {
        var h = ChatHarness()
        let a = h.register("alice")
        var refresh = a.refresh
        for _ in 0..<3 {
            let answer = h.send("POST", "/auth/refresh", ["refresh_token": .string(refresh)])
            #expect(answer.status == 200)
            refresh = answer.jsonBody?["refresh_token"]?.stringValue ?? ""
        }
        let b = h.register("bob")
        let table = h.server.state.refreshTokens
        let alices = table.entries.values.filter { $0.login.userID == a.userID }
        #expect(alices.count == 4 && alices.filter { $0.state == .rotated }.count == 3)
        #expect(alices.allSatisfy { $0.login === alices[0].login })
        #expect(table.entries.values.contains { $0.login.userID == b.userID && $0.login !== alices[0].login })
        // The chain: each rotated token's successor is a stored token of the same login.
        for entry in alices where entry.state == .rotated {
            #expect(entry.successor.flatMap { table.entries[$0] }?.login === entry.login)
        }
        // Read as rows they are what was stored: the key, the family and the successor's key.
        let rows = table.rows
        #expect(rows.allSatisfy { $0.key == $0.value.tokenHash && ($0.value.successor.map { rows[$0] != nil } ?? true) })
    }

    @Test("a stored message names its sender's device with the device row's id, not the copy its request carried")
    func senderDeviceIsTheDeviceRow() {
        var h = ChatHarness()
        let alice = h.register("alice")
        let group = h.legacyGroup(alice)
        // The id is parsed out of this request's JSON: a string of its own until the server shares it.
        let sent = h.send("POST", "/channels/\(group)/messages", ["content": "hi", "sender_device_id": .string(alice.deviceID)], token: alice.access)
        #expect(sent.status == 201)
        let message = h.server.state.messages.values.first
        let device = h.server.state.devices[alice.deviceID]
        #expect(message?.senderDeviceID == alice.deviceID)
        #expect(storageAddress(of: message?.senderDeviceID) == storageAddress(of: device?.id))
    }
}
