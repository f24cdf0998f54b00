internal import CSodium
import ChatCrypto
import LabCrypto

extension CryptoBenchmark {
    /// Raw buffers for the bare-call loops: the same libsodium calls as the profile, with
    /// nothing around them.
    final class BareBuffers {
        let size = 4096
        let memory: UnsafeMutablePointer<UInt8>
        var sink = 0
        var plaintextBytes = 0
        var counter: UInt32 = 0
        var seed = [UInt8](repeating: 7, count: 32)

        init() {
            memory = .allocate(capacity: size)
            memory.initialize(repeating: 0, count: size)
            memory[3900] = 1
            memory[3901] = 2
        }

        deinit { memory.deallocate() }

        // Regions of `memory`.
        var sendChain: UnsafeMutablePointer<UInt8> { memory }
        var receiveChain: UnsafeMutablePointer<UInt8> { memory + 32 }
        var messageKey: UnsafeMutablePointer<UInt8> { memory + 64 }
        var keyNonce: UnsafeMutablePointer<UInt8> { memory + 96 }  // 64 bytes: two HKDF blocks
        var prk: UnsafeMutablePointer<UInt8> { memory + 160 }
        var ad: UnsafeMutablePointer<UInt8> { memory + 192 }  // 64 AD + 40 header
        var scratch: UnsafeMutablePointer<UInt8> { memory + 320 }  // 256 bytes
        var wire: UnsafeMutablePointer<UInt8> { memory + 1024 }
        var output: UnsafeMutablePointer<UInt8> { memory + 2560 }

        func reset(chainKey: [UInt8], ad associatedData: [UInt8], ratchet: [UInt8], plaintextBytes: Int) {
            precondition(plaintextBytes <= 1200)
            self.plaintextBytes = plaintextBytes
            counter = 0
            chainKey.withUnsafeBufferPointer {
                sendChain.update(from: $0.baseAddress!, count: 32)
                receiveChain.update(from: $0.baseAddress!, count: 32)
            }
            associatedData.withUnsafeBufferPointer { ad.update(from: $0.baseAddress!, count: 64) }
            ratchet.withUnsafeBufferPointer { (ad + 64).update(from: $0.baseAddress!, count: 32) }
        }

        /// HMAC of up to three parts, straight through libsodium.
        @inline(__always)
        func hmac(_ key: UnsafePointer<UInt8>, _ keyCount: Int, _ a: UnsafePointer<UInt8>, _ aCount: Int,
                  _ b: UnsafePointer<UInt8>? = nil, _ bCount: Int = 0, _ c: UnsafePointer<UInt8>? = nil, _ cCount: Int = 0,
                  into out: UnsafeMutablePointer<UInt8>) {
            var state = crypto_auth_hmacsha256_state()
            crypto_auth_hmacsha256_init(&state, key, keyCount)
            crypto_auth_hmacsha256_update(&state, a, UInt64(aCount))
            if let b { crypto_auth_hmacsha256_update(&state, b, UInt64(bCount)) }
            if let c { crypto_auth_hmacsha256_update(&state, c, UInt64(cCount)) }
            crypto_auth_hmacsha256_final(&state, out)
        }

        /// Bytes 0x01 and 0x02, and 32 zero bytes.
        var one: UnsafeMutablePointer<UInt8> { memory + 3900 }
        var two: UnsafeMutablePointer<UInt8> { memory + 3901 }
        var zeros: UnsafeMutablePointer<UInt8> { memory + 3904 }

        /// `HKDF(zero salt, ikm, info, 32 or 56)` as its HMAC calls.
        func hkdf(_ ikm: UnsafePointer<UInt8>, _ ikmCount: Int, info: UnsafePointer<UInt8>, _ infoCount: Int, blocks: Int) {
            hmac(zeros, 32, ikm, ikmCount, into: prk)
            hmac(prk, 32, info, infoCount, one, 1, into: keyNonce)
            if blocks == 2 { hmac(prk, 32, keyNonce, 32, info, infoCount, two, 1, into: keyNonce + 32) }
        }

        func chainStep(_ chain: UnsafeMutablePointer<UInt8>) {
            hmac(chain, 32, one, 1, into: messageKey)
            hmac(chain, 32, two, 1, into: scratch)
            chain.update(from: scratch, count: 32)
        }
    }
}

extension CryptoBenchmark.Fixture {
    mutating func bareHandshakes(_ n: Int) {
        let b = bare
        let aliceCurve = alice.agreement.seed, bobCurve = bob.agreement.seed
        let spk = signedPreKey.pair.seed, opk = oneTime.pair.seed
        let ikm = b.scratch  // 0xFF × 32 || DH1…DH4
        for _ in 0..<n {
            let ephemeralPublic = b.output, ephemeralSecret = b.output + 32, bobX = b.output + 64, aliceX = b.output + 96
            b.seed.withUnsafeBufferPointer { ephemeralSecret.update(from: $0.baseAddress!, count: 32) }
            crypto_scalarmult_base(ephemeralPublic, ephemeralSecret)
            // Initiator.
            _ = crypto_sign_verify_detached(bundle.signedPreKeySignature, bundle.signedPreKey, 32, bundle.identityKey)
            _ = crypto_sign_ed25519_pk_to_curve25519(bobX, bundle.identityKey)
            ikm.update(repeating: 0xFF, count: 32)
            _ = crypto_scalarmult(ikm + 32, aliceCurve, bundle.signedPreKey)
            _ = crypto_scalarmult(ikm + 64, ephemeralSecret, bobX)
            _ = crypto_scalarmult(ikm + 96, ephemeralSecret, bundle.signedPreKey)
            _ = crypto_scalarmult(ikm + 128, ephemeralSecret, bundle.oneTimePreKey!.key)
            ProfileInfo.x3dh.withUnsafeBufferPointer { b.hkdf(ikm, 160, info: $0.baseAddress!, $0.count, blocks: 1) }
            // Responder.
            _ = crypto_sign_ed25519_pk_to_curve25519(aliceX, alice.publicKey)
            _ = crypto_scalarmult(ikm + 32, spk, aliceX)
            _ = crypto_scalarmult(ikm + 64, bobCurve, ephemeralPublic)
            _ = crypto_scalarmult(ikm + 96, spk, ephemeralPublic)
            _ = crypto_scalarmult(ikm + 128, opk, ephemeralPublic)
            ProfileInfo.x3dh.withUnsafeBufferPointer { b.hkdf(ikm, 160, info: $0.baseAddress!, $0.count, blocks: 1) }
            b.sink ^= Int(b.keyNonce[0])
        }
    }

    mutating func bareRatchetMessages(_ n: Int) {
        let b = bare
        let messageInfo = ProfileInfo.message
        let count = b.plaintextBytes
        for _ in 0..<n {
            // Sender: header into AD, KDF_CK, HKDF, seal.
            let header = b.ad + 64
            var pn = UInt32(0).bigEndian, number = b.counter.bigEndian
            withUnsafeBytes(of: &pn) { (header + 32).update(from: $0.baseAddress!.assumingMemoryBound(to: UInt8.self), count: 4) }
            withUnsafeBytes(of: &number) { (header + 36).update(from: $0.baseAddress!.assumingMemoryBound(to: UInt8.self), count: 4) }
            b.chainStep(b.sendChain)
            messageInfo.withUnsafeBufferPointer { b.hkdf(b.messageKey, 32, info: $0.baseAddress!, $0.count, blocks: 2) }
            var written: UInt64 = 0
            b.wire[0] = 0x02
            (b.wire + 1).update(from: header, count: 40)
            plaintext.withUnsafeBufferPointer { p in
                _ = crypto_aead_xchacha20poly1305_ietf_encrypt(b.wire + 41, &written, p.baseAddress, UInt64(count), b.ad, 104, nil, b.keyNonce + 32, b.keyNonce)
            }
            // Receiver: the same derivations, then open.
            b.chainStep(b.receiveChain)
            messageInfo.withUnsafeBufferPointer { b.hkdf(b.messageKey, 32, info: $0.baseAddress!, $0.count, blocks: 2) }
            let ok = crypto_aead_xchacha20poly1305_ietf_decrypt(b.output, &written, nil, b.wire + 41, UInt64(count + 16), b.ad, 104, b.keyNonce + 32, b.keyNonce)
            b.sink ^= Int(ok) ^ Int(written)
            b.counter += 1
        }
    }

    mutating func bareGroupSends(_ n: Int) {
        let b = bare
        let groupInfo = ProfileInfo.group
        let count = b.plaintextBytes
        let channel = Array(sender.channelID.utf8)
        var publicKey = [UInt8](repeating: 0, count: 32), secret = [UInt8](repeating: 0, count: 64)
        crypto_sign_seed_keypair(&publicKey, &secret, SHA256.hash("bench sign"))
        for _ in 0..<n {
            b.chainStep(b.sendChain)
            groupInfo.withUnsafeBufferPointer { b.hkdf(b.messageKey, 32, info: $0.baseAddress!, $0.count, blocks: 2) }
            b.wire[0] = 0x03
            var iteration = b.counter.bigEndian
            withUnsafeBytes(of: &iteration) { (b.wire + 1).update(from: $0.baseAddress!.assumingMemoryBound(to: UInt8.self), count: 4) }
            var written: UInt64 = 0
            plaintext.withUnsafeBufferPointer { p in
                _ = crypto_aead_xchacha20poly1305_ietf_encrypt(b.wire + 5, &written, p.baseAddress, UInt64(count), channel, UInt64(channel.count), nil,
                                                              b.keyNonce + 32, b.keyNonce)
            }
            let body = 5 + count + 16
            crypto_sign_detached(b.wire + body, nil, b.wire, UInt64(body), secret)
            b.sink ^= Int(b.wire[body])
            b.counter += 1
        }
    }

    mutating func bareGroupReceives(_ n: Int) {
        let b = bare
        let groupInfo = ProfileInfo.group
        let channel = Array(receiver.channelID.utf8)
        let publicKey = sender.distribution.signingPublicKey
        for wire in groupWires.prefix(n) {
            let body = wire.count - 64
            wire.withUnsafeBufferPointer { w in
                let p = w.baseAddress!
                _ = crypto_sign_verify_detached(p + body, p, UInt64(body), publicKey)
                b.chainStep(b.receiveChain)
                groupInfo.withUnsafeBufferPointer { b.hkdf(b.messageKey, 32, info: $0.baseAddress!, $0.count, blocks: 2) }
                var written: UInt64 = 0
                let ok = crypto_aead_xchacha20poly1305_ietf_decrypt(b.output, &written, nil, p + 5, UInt64(body - 5), channel, UInt64(channel.count),
                                                                   b.keyNonce + 32, b.keyNonce)
                b.sink ^= Int(ok)
            }
        }
    }
}
