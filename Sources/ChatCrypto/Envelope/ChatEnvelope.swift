import LabKernel

/// How encrypted content travels in a message's `content` string (protocol_version 2).
///
/// - Group (`sender_keys`) channels: standard base64 of a sender-key wire (`0x03 …`).
/// - DMs, and sender-key distributions in any channel: a pairwise envelope, canonical
///   JSON `{"from": device, "to": {device: {"w": base64 ratchet wire, "x3dh": {…}?}}, "v": 2}`
///   with one ratchet message per recipient device (every device of both users, so each
///   can read), and for a session's first message the X3DH data the recipient needs
///   (`ik`, `ek`, `spk`, `otk`: base64 public keys, `otk` null when no one-time key was used).
public enum ChatEnvelope {
    public static let distributionContentType = "sender_key_distribution"

    public struct Prekey: Sendable, Equatable, Codable {
        public var identityKey: [UInt8]
        public var ephemeralKey: [UInt8]
        public var signedPreKey: [UInt8]
        public var oneTimeKey: [UInt8]?

        public init(identityKey: [UInt8], ephemeralKey: [UInt8], signedPreKey: [UInt8], oneTimeKey: [UInt8]?) {
            self.identityKey = identityKey
            self.ephemeralKey = ephemeralKey
            self.signedPreKey = signedPreKey
            self.oneTimeKey = oneTimeKey
        }
    }

    public struct Item: Sendable, Equatable {
        public var wire: [UInt8]
        public var prekey: Prekey?

        public init(wire: [UInt8], prekey: Prekey?) {
            self.wire = wire
            self.prekey = prekey
        }
    }

    public static func encode(from: String, to items: [String: Item]) -> String {
        var to: [String: JSONValue] = [:]
        for (device, item) in items {
            var entry: [String: JSONValue] = ["w": .string(Base64.encode(item.wire))]
            if let p = item.prekey {
                entry["x3dh"] = ["ik": .string(Base64.encode(p.identityKey)), "ek": .string(Base64.encode(p.ephemeralKey)),
                                 "spk": .string(Base64.encode(p.signedPreKey)), "otk": p.oneTimeKey.map { .string(Base64.encode($0)) } ?? .null]
            }
            to[device] = .object(entry)
        }
        return JSONValue.object(["v": 2, "from": .string(from), "to": .object(to)]).canonicalText
    }

    /// The sender device and the items, or nil when `content` is not an envelope.
    public static func decode(_ content: String) -> (from: String, to: [String: Item])? {
        guard let value = try? JSONValue.parse(content), value["v"] == 2, let from = value["from"]?.stringValue,
              let to = value["to"]?.objectValue, !to.isEmpty else { return nil }
        var items: [String: Item] = [:]
        for (device, entry) in to {
            guard let wire = entry["w"]?.stringValue.flatMap(Base64.decode), wire.count >= 57, wire[0] == 0x02 else { return nil }
            var prekey: Prekey?
            if let x = entry["x3dh"], x != .null {
                guard let ik = x["ik"]?.stringValue.flatMap(Base64.decode), let ek = x["ek"]?.stringValue.flatMap(Base64.decode),
                      let spk = x["spk"]?.stringValue.flatMap(Base64.decode), ik.count == 32, ek.count == 32, spk.count == 32 else { return nil }
                let otk = x["otk"]?.stringValue.flatMap(Base64.decode)
                if x["otk"] != nil, x["otk"] != .null, otk?.count != 32 { return nil }
                prekey = Prekey(identityKey: ik, ephemeralKey: ek, signedPreKey: spk, oneTimeKey: otk)
            }
            items[device] = Item(wire: wire, prekey: prekey)
        }
        return (from, items)
    }

    public static func isPairwiseCiphertext(_ content: String) -> Bool { decode(content) != nil }

    public static func isGroupCiphertext(_ content: String) -> Bool {
        guard let wire = Base64.decode(content) else { return false }
        return wire.count >= 85 && wire[0] == 0x03
    }
}
