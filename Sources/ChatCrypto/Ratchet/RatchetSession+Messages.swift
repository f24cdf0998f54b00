import LabCrypto

extension RatchetSession {
    /// Encrypts one message: `0x02 || header || AEAD(…)`. `nextRatchetSeed` is asked for
    /// 32 bytes only when this message turns the ratchet.
    public mutating func encrypt(_ plaintext: [UInt8], nextRatchetSeed: () -> [UInt8]) throws(ChatCryptoError) -> [UInt8] {
        try encrypt(plaintext, nextRatchetSeed: nextRatchetSeed) { _ in }
    }

    /// The same, showing `messageKey` the message key it used (the vectors publish it).
    mutating func encrypt(_ plaintext: [UInt8], nextRatchetSeed: () -> [UInt8],
                          messageKey observe: (UnsafeRawBufferPointer) -> Void) throws(ChatCryptoError) -> [UInt8] {
        if turnPending, let remote = remoteRatchet {
            do { sendingRatchet = try X25519.KeyPair(seed: nextRatchetSeed()) } catch { throw .key(error) }
            sendingChain = try Self.turn(&rootKey, ours: sendingRatchet, theirs: remote)
            turnPending = false
        }
        guard var chain = sendingChain else { throw .cannotSendYet }
        sendingChain = nil  // keep the chain uniquely referenced while it advances in place
        var wire = [UInt8]()
        wire.reserveCapacity(1 + Self.headerCount + plaintext.count + XChaCha20Poly1305.tagCount)
        wire.append(Self.version)
        wire += sendingRatchet.publicKey
        wire.appendUInt32(previousCount)
        wire.appendUInt32(sendCount)
        let bodyStart = wire.count
        wire += repeatElement(0, count: plaintext.count + XChaCha20Poly1305.tagCount)
        withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { messageKey in
            defer { messageKey.initializeMemory(as: UInt8.self, repeating: 0) }
            Self.step(&chain, messageKey: messageKey)
            observe(UnsafeRawBufferPointer(messageKey))
            withMessageKey(UnsafeRawBufferPointer(messageKey), info: ProfileInfo.message) { keyNonce in
                seal(plaintext, keyNonce: keyNonce, wire: &wire, bodyStart: bodyStart)
            }
        }
        sendingChain = chain
        sendCount += 1
        return wire
    }

    private func seal(_ plaintext: [UInt8], keyNonce: UnsafeRawBufferPointer, wire: inout [UInt8], bodyStart: Int) {
        withAssociatedData(header: wire, headerStart: 1) { ad in
            wire.withUnsafeMutableBytes { w in
                plaintext.withUnsafeBytes { p in
                    XChaCha20Poly1305.seal(p, keyAndNonce: keyNonce, ad: ad, into: UnsafeMutableRawBufferPointer(rebasing: w[bodyStart...]))
                }
            }
        }
    }

    /// `AD || header` on the stack.
    private func withAssociatedData<T>(header: [UInt8], headerStart: Int, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        withUnsafeTemporaryAllocation(byteCount: associatedData.count + Self.headerCount, alignment: 8) { ad in
            associatedData.withUnsafeBytes { ad.copyMemory(from: $0) }
            header.withUnsafeBytes { h in
                UnsafeMutableRawBufferPointer(rebasing: ad[associatedData.count...])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: h[headerStart..<(headerStart + Self.headerCount)]))
            }
            return body(UnsafeRawBufferPointer(ad))
        }
    }

    /// Decrypts one message. On any error the session is unchanged.
    public mutating func decrypt(_ wire: [UInt8]) throws(ChatCryptoError) -> [UInt8] {
        let minimum = 1 + Self.headerCount + XChaCha20Poly1305.tagCount
        guard wire.count >= minimum else { throw .malformed("a ratchet message is at least \(minimum) bytes, found \(wire.count)") }
        guard wire[0] == Self.version else { throw .malformed("version byte \(wire[0]), expected 2") }
        let ratchet = Array(wire[1..<33])
        let previous = wire.uint32(at: 33), number = wire.uint32(at: 37)
        let skippedID = SkippedKey(ratchet: ratchet, number: number)
        if let key = skipped[skippedID] {
            let plaintext = try open(wire, messageKey: key)
            skipped[skippedID] = nil
            skippedOrder.removeAll { $0 == skippedID }
            return plaintext
        }
        var next = self
        if ratchet != next.remoteRatchet {
            if next.receivingChain != nil { try next.skip(until: previous) }
            next.previousCount = next.sendCount
            next.sendCount = 0
            next.receiveCount = 0
            next.remoteRatchet = ratchet
            next.receivingChain = try Self.turn(&next.rootKey, ours: next.sendingRatchet, theirs: ratchet)
            next.sendingChain = nil
            next.turnPending = true
        }
        if number < next.receiveCount { throw .replay(iteration: number) }
        try next.skip(until: number)
        guard var chain = next.receivingChain else { throw .malformed("no receiving chain") }
        next.receivingChain = nil
        let key = withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { messageKey in
            defer { messageKey.initializeMemory(as: UInt8.self, repeating: 0) }
            Self.step(&chain, messageKey: messageKey)
            return SecretKey32(bytes: UnsafeRawBufferPointer(messageKey))
        }
        next.receivingChain = chain
        next.receiveCount = number + 1
        let plaintext = try next.open(wire, messageKey: key)
        self = next
        return plaintext
    }

    /// Stores the keys of messages `receiveCount..<until` of the receiving chain.
    mutating func skip(until: UInt32) throws(ChatCryptoError) {
        guard let remote = remoteRatchet, until > receiveCount else { return }
        let gap = Int(until - receiveCount)
        guard gap <= Self.maxSkippedKeys else { throw .gapTooLarge(skipped: gap, limit: Self.maxSkippedKeys) }
        guard var chain = receivingChain else { return }
        receivingChain = nil
        while receiveCount < until {
            let key = withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { messageKey in
                defer { messageKey.initializeMemory(as: UInt8.self, repeating: 0) }
                Self.step(&chain, messageKey: messageKey)
                return SecretKey32(bytes: UnsafeRawBufferPointer(messageKey))
            }
            let id = SkippedKey(ratchet: remote, number: receiveCount)
            skipped[id] = key
            skippedOrder.append(id)
            receiveCount += 1
        }
        receivingChain = chain
        if skippedOrder.count > Self.maxSkippedKeys {
            for old in skippedOrder.prefix(skippedOrder.count - Self.maxSkippedKeys) { skipped[old] = nil }
            skippedOrder.removeFirst(skippedOrder.count - Self.maxSkippedKeys)
        }
    }

    func open(_ wire: [UInt8], messageKey: SecretKey32) throws(ChatCryptoError) -> [UInt8] {
        let bodyStart = 1 + Self.headerCount
        var plaintext = [UInt8](repeating: 0, count: wire.count - bodyStart - XChaCha20Poly1305.tagCount)
        let ok = messageKey.withBytes { mk in
            withMessageKey(mk, info: ProfileInfo.message) { keyNonce in
                withAssociatedData(header: wire, headerStart: 1) { ad in
                    wire.withUnsafeBytes { w in
                        plaintext.withUnsafeMutableBytes { p in
                            XChaCha20Poly1305.open(UnsafeRawBufferPointer(rebasing: w[bodyStart...]), keyAndNonce: keyNonce, ad: ad, into: p)
                        }
                    }
                }
            }
        }
        guard ok else { throw .authenticationFailed }
        return plaintext
    }
}
