public import ChatCrypto
import LabCrypto
public import LabKernel

/// A device's keys and pairwise sessions: what must survive a restart for the device
/// to keep reading. One-time pre-key private keys are used once and then dropped.
public struct ChatKeyStore: Sendable, Codable {
    public var identity: IdentityKey
    public var signedPreKey: PreKey
    public var oneTimeKeys = OneTimePreKeys()
    var nextPreKeyID: UInt32 = 2
    /// Sessions per peer device, newest first (at most three: simultaneous first messages
    /// leave two, and the one that decrypts is promoted).
    /// The ids are held as `ChatID`s (16 bytes for the server's UUIDs, where each text was
    /// a heap string of its own) and stored as the same texts.
    public var sessions: [ChatID: [PairwiseSession]] = [:]
    /// Our sender chain per group channel, and the devices it was distributed to.
    public var senderChains: [ChatID: SenderKeyChain] = [:]
    public var distributedTo: [ChatID: Set<ChatID>] = [:]
    /// Receivers per channel and sender device, newest first: a sender's chain before its
    /// last rotations is kept (at most `maxChainsPerSender`) for messages that arrive late.
    public var receivers: [SenderKeyOwner: [SenderKeyReceiver]] = [:]
    public static let maxChainsPerSender = 8

    public struct PairwiseSession: Sendable, Codable {
        public var ratchet: RatchetSession
        /// Sent with every message until the peer answers, so it can set the session up.
        public var prekey: ChatEnvelope.Prekey?
    }

    public init(generator: inout SeededGenerator) throws(ChatCryptoError) {
        identity = try IdentityKey(seed: generator.bytes(32))
        signedPreKey = try PreKey(id: 1, seed: generator.bytes(32))
    }

    /// `count` new one-time keys; returns their public keys (base64) for upload.
    public mutating func makeOneTimeKeys(_ count: Int, generator: inout SeededGenerator) throws(ChatCryptoError) -> [String] {
        var out: [String] = []
        for _ in 0..<count {
            let publicKey = try oneTimeKeys.add(id: nextPreKeyID, seed: generator.bytes(32))
            nextPreKeyID += 1
            out.append(Base64.encode(publicKey))
        }
        return out
    }

    /// The `/keys/upload` body for this device.
    public func uploadBody(deviceID: String, oneTime: [String]) -> JSONValue {
        let bundle = PreKeyBundle(identity: identity, signedPreKey: signedPreKey, oneTimePreKey: nil)
        return ["device_id": .string(deviceID), "identity_key": .string(Base64.encode(identity.publicKey)),
                "signed_pre_key": .string(Base64.encode(signedPreKey.publicKey)),
                "signed_pre_key_signature": .string(Base64.encode(bundle.signedPreKeySignature)),
                "one_time_pre_keys": .array(oneTime.map { .string($0) })]
    }

    // MARK: Pairwise

    /// Encrypts for one peer device, starting a session from its bundle when there is none.
    public mutating func encrypt(_ plaintext: [UInt8], for device: ChatID, bundle: PreKeyBundle?,
                                 generator: inout SeededGenerator) throws(ChatCryptoError) -> ChatEnvelope.Item {
        if sessions[device]?.first(where: { $0.ratchet.canSend }) == nil {
            guard let bundle else { throw .malformed("no session with device \(device) and no key bundle for it") }
            let ephemeral: X25519.KeyPair, first: X25519.KeyPair
            do {
                ephemeral = try X25519.KeyPair(seed: generator.bytes(32))
                first = try X25519.KeyPair(seed: generator.bytes(32))
            } catch { throw .key(error) }
            let agreement = try X3DH.initiate(identity: identity, ephemeral: ephemeral, bundle: bundle)
            let ratchet = try RatchetSession(initiator: agreement, remoteSignedPreKey: bundle.signedPreKey, firstRatchet: first)
            let prekey = ChatEnvelope.Prekey(identityKey: identity.publicKey, ephemeralKey: ephemeral.publicKey,
                                             signedPreKey: bundle.signedPreKey, oneTimeKey: bundle.oneTimePreKey?.key)
            remember(PairwiseSession(ratchet: ratchet, prekey: prekey), for: device)
        }
        let index = sessions[device]!.firstIndex { $0.ratchet.canSend }!
        let wire = try sessions[device]![index].ratchet.encrypt(plaintext) { generator.bytes(32) }
        return ChatEnvelope.Item(wire: wire, prekey: sessions[device]![index].prekey)
    }

    /// A new session becomes the newest for its device; at most three are kept.
    mutating func remember(_ session: PairwiseSession, for device: ChatID) {
        sessions[device, default: []].insert(session, at: 0)
        sessions[device] = Array(sessions[device]!.prefix(3))
    }

    /// Decrypts an envelope item from a peer device: existing sessions first (newest
    /// first), then a new responder session from the item's X3DH data.
    public mutating func decrypt(_ item: ChatEnvelope.Item, from device: ChatID) throws(ChatCryptoError) -> [UInt8] {
        var lastError = ChatCryptoError.malformed("no session with device \(device) and no X3DH data in the message")
        for index in (sessions[device] ?? []).indices {
            do {
                var session = sessions[device]![index]
                let plaintext = try session.ratchet.decrypt(item.wire)
                session.prekey = nil  // the peer has answered: no more X3DH data needed
                sessions[device]!.remove(at: index)
                sessions[device]!.insert(session, at: 0)
                return plaintext
            } catch { lastError = error }
        }
        guard let prekey = item.prekey else { throw lastError }
        guard prekey.signedPreKey == signedPreKey.publicKey else { throw .malformed("the message was sent to a signed pre-key this device no longer has") }
        var oneTime: PreKey?
        if let key = prekey.oneTimeKey {
            guard let stored = try oneTimeKeys.key(publicKey: key) else { throw .replay(iteration: 0) }
            oneTime = stored
        }
        let agreement = try X3DH.respond(identity: identity, signedPreKey: signedPreKey, oneTimePreKey: oneTime,
                                         initiatorIdentity: prekey.identityKey, initiatorEphemeral: prekey.ephemeralKey)
        var ratchet = RatchetSession(responder: agreement, signedPreKey: signedPreKey)
        let plaintext = try ratchet.decrypt(item.wire)
        if let key = prekey.oneTimeKey { oneTimeKeys.remove(publicKey: key) }
        remember(PairwiseSession(ratchet: ratchet, prekey: nil), for: device)
        return plaintext
    }
}

/// A sender's chains in a channel are kept under the channel and the sender's device,
/// stored as the text `channel|device`.
public struct SenderKeyOwner: Hashable, Sendable, StoredAsText, CustomStringConvertible {
    public var channel: ChatID
    public var device: ChatID

    public init(channel: ChatID, device: ChatID) {
        self.channel = channel
        self.device = device
    }

    public var text: String { "\(channel.text)|\(device.text)" }
    public var description: String { text }

    /// Splits at the first `|` (a UUID has none); nil for a text without one.
    public init?(_ text: String) {
        guard let bar = text.firstIndex(of: "|") else { return nil }
        self.init(channel: ChatID(String(text[..<bar])), device: ChatID(String(text[text.index(after: bar)...])))
    }
}
