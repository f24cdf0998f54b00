import Testing
import LabCrypto
import LabKernel
@testable import ChatCrypto

@Suite("Chat crypto: sender keys")
struct SenderKeyTests {
    func chain(_ channel: String = "c-1") throws -> SenderKeyChain {
        try SenderKeyChain(channelID: channel, chainKey: SHA256.hash("ck"), signingSeed: SHA256.hash("sign"))
    }

    @Test("members decrypt in any order from the distribution; each message once")
    func roundTrip() throws {
        var sender = try chain()
        var receiver = SenderKeyReceiver(channelID: "c-1", distribution: try SenderKeyDistribution(bytes: sender.distribution.bytes))
        let m = (0..<5).map { n in sender.encrypt(Array("m\(n)".utf8)) }
        #expect(m[0][0] == 0x03 && m[0].count == 5 + 2 + 16 + 64)
        #expect(try receiver.decrypt(m[0]) == Array("m0".utf8))
        #expect(try receiver.decrypt(m[3]) == Array("m3".utf8))
        #expect(try receiver.decrypt(m[1]) == Array("m1".utf8))
        #expect(throws: ChatCryptoError.replay(iteration: 1)) { try receiver.decrypt(m[1]) }
        #expect(try receiver.decrypt(m[2]) == Array("m2".utf8))
        #expect(try receiver.decrypt(m[4]) == Array("m4".utf8))
        #expect(receiver.skipped.isEmpty)
    }

    @Test("a member who joins later starts at the sender's current iteration")
    func lateJoiner() throws {
        var sender = try chain()
        _ = sender.encrypt([1])
        _ = sender.encrypt([2])
        var late = SenderKeyReceiver(channelID: "c-1", distribution: sender.distribution)
        #expect(try late.decrypt(sender.encrypt([3])) == [3])
    }

    @Test("the signature is checked first; another channel, a forward jump over 25,000 and garbage are typed errors")
    func hostile() throws {
        var sender = try chain()
        var receiver = SenderKeyReceiver(channelID: "c-1", distribution: sender.distribution)
        let m = sender.encrypt(Array("hello".utf8))
        var body = m
        body[7] ^= 1
        #expect(throws: ChatCryptoError.badMessageSignature) { try receiver.decrypt(body) }
        var other = SenderKeyReceiver(channelID: "c-2", distribution: try chain().distribution)
        #expect(throws: ChatCryptoError.authenticationFailed) { try other.decrypt(m) }
        let impostor = try SenderKeyChain(channelID: "c-1", chainKey: SHA256.hash("ck"), signingSeed: SHA256.hash("evil"))
        var forged = impostor
        #expect(throws: ChatCryptoError.badMessageSignature) { try receiver.decrypt(forged.encrypt([1])) }
        var jumping = try SenderKeyChain(channelID: "c-1", chainKey: SHA256.hash("ck"), signingSeed: SHA256.hash("sign"), iteration: 25_001)
        #expect(throws: ChatCryptoError.gapTooLarge(skipped: 25_001, limit: 25_000)) { try receiver.decrypt(jumping.encrypt([1])) }
        #expect(throws: ChatCryptoError.self) { try receiver.decrypt([0x03, 0, 0]) }
        #expect(throws: ChatCryptoError.self) { try SenderKeyDistribution(bytes: [0x04, 1]) }
        #expect(try receiver.decrypt(m) == Array("hello".utf8), "nothing above changed the receiver")
    }

    @Test("a jump of 25,000 keeps only the newest 2,000 skipped keys")
    func skippedLimit() throws {
        var sender = try chain()
        var receiver = SenderKeyReceiver(channelID: "c-1", distribution: sender.distribution)
        var early: [UInt8] = []
        var recent: [UInt8] = []
        for n in 0..<25_000 {
            let m = sender.encrypt([UInt8(n % 256)])
            if n == 10 { early = m }
            if n == 24_000 { recent = m }
        }
        #expect(try receiver.decrypt(sender.encrypt([9])) == [9])
        #expect(receiver.skipped.count == 2_000)
        #expect(throws: ChatCryptoError.replay(iteration: 10)) { try receiver.decrypt(early) }
        #expect(try receiver.decrypt(recent) == [UInt8(24_000 % 256)])
    }
}
