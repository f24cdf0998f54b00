import Testing
import LabKernel
import LabTestSupport
@testable import SecureChatServer

/// Strings the chat server keeps for the whole run are held once where two rows name the
/// same thing: memory, not behaviour (the answers are checked by the other suites), so
/// what is checked is that the rows share one copy.
@Suite("Chat server: what rows repeat is kept once")
struct SharedStorageTests {
    @Test("a rotated refresh token names its successor with the successor's own stored key, not a copy")
    func successorIsTheStoredKey() {
        var h = ChatHarness()
        let a = h.register("alice")
        #expect(h.send("POST", "/auth/refresh", ["refresh_token": .string(a.refresh)]).status == 200)
        let rotated = h.server.state.refreshTokens.values.filter { $0.state == .rotated }
        let active = h.server.state.refreshTokens.filter { $0.value.state == .active }
        #expect(rotated.count == 1 && active.count == 1)
        guard let successor = rotated.first?.successor, let (key, record) = active.first else { return }
        #expect(successor == key)
        #expect(storageAddress(of: successor) == storageAddress(of: key) && storageAddress(of: successor) == storageAddress(of: record.tokenHash))
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
