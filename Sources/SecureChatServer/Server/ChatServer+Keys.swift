import LabCrypto
import LabKernel

extension ChatServer {
    // MARK: Devices

    mutating func createDevice(_ request: HTTPRequestMessage, caller: Caller, now: Instant) throws -> HTTPResponseMessage {
        let f = try fields(request)
        let name: String, key: String?
        do {
            name = try f.string("device_name")
            key = try f.optionalString("device_key_public")
        } catch { throw ChatAPIError.field(error) }
        try checkDeviceName(name)
        if let key { try requireKey(key, ["body", "device_key_public"]) }
        let id = addDevice(caller.userID, name: name, now: now)
        state.devices[id]?.deviceKeyPublic = key
        return .json(201, deviceJSON(state.devices[id]!))
    }

    func listDevices(_ caller: Caller) -> HTTPResponseMessage {
        let mine = state.devices.values.filter { $0.userID == caller.userID }.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
        return .json(200, .array(mine.map(deviceJSON)))
    }

    /// Removes a device: its keys, its tokens and tickets, and its open sockets (closed with
    /// 4003). Every member of a channel with the owner hears the device set changed.
    mutating func deleteDevice(_ id: String, caller: Caller, outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        try requireUUID(id, ["path", "device_id"])
        guard state.devices[id]?.userID == caller.userID else { throw ChatAPIError(404, "Device not found") }
        state.devices[id] = nil
        let hadKeys = state.bundles[id] != nil
        state.removeBundle(id)
        revokeTokens(of: .device(id))
        state.tickets = state.tickets.filter { $0.value.deviceID != id }
        outputs += closeConnections(code: 4003, reason: "Device removed") { $0.deviceID == id }
        if hadKeys { deviceSetChanged(caller.userID, outputs: &outputs) }
        return .empty(204)
    }

    func deviceJSON(_ d: ChatDevice) -> JSONValue {
        ["id": .string(d.id), "device_name": .string(d.name), "device_key_public": d.deviceKeyPublic.map { .string($0) } ?? .null,
         "last_seen_at": .string(timestamp(d.lastSeenAt)), "created_at": .string(timestamp(d.createdAt))]
    }

    /// A public key on the wire: standard base64 of 32 bytes (Ed25519 or X25519).
    @discardableResult
    func requireKey(_ text: String, _ loc: [String], bytes: Int = 32) throws -> [UInt8] {
        guard let decoded = Base64.decode(text), decoded.count == bytes else {
            throw ChatAPIError.validation(loc, "Input should be base64 of \(bytes) bytes", type: "value_error")
        }
        return decoded
    }

    /// The one-time pre-keys of a request, each checked: 32 bytes in canonical base64 (so
    /// it is handed out as the same text).
    func requireOneTimeKeys(_ keys: [String]) throws -> [Bytes32] {
        try keys.enumerated().map { index, key in Bytes32(try requireKey(key, ["body", "one_time_pre_keys", String(index)]))! }
    }

    // MARK: Key bundles

    /// `POST /keys/upload`: replaces the device's bundle. The server checks the signed
    /// pre-key's Ed25519 signature, which d3chat could not (its signing key was never uploaded).
    mutating func uploadKeys(_ request: HTTPRequestMessage, caller: Caller, outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        let f = try fields(request)
        let deviceID: String, identity: String, signedPreKey: String, signature: String, oneTime: [String]
        do {
            deviceID = try f.string("device_id")
            identity = try f.string("identity_key")
            signedPreKey = try f.string("signed_pre_key")
            signature = try f.string("signed_pre_key_signature")
            oneTime = try Self.oneTimeKeys(f)
        } catch { throw ChatAPIError.field(error) }
        try requireUUID(deviceID, ["body", "device_id"])
        guard state.devices[deviceID]?.userID == caller.userID else { throw ChatAPIError(404, "Device not found") }
        try requireKey(identity, ["body", "identity_key"])
        try requireKey(signedPreKey, ["body", "signed_pre_key"])
        try requireKey(signature, ["body", "signed_pre_key_signature"], bytes: 64)
        let record = KeyBundleRecord(deviceID: deviceID, userID: caller.userID, identityKey: identity, signedPreKey: signedPreKey,
                                     signedPreKeySignature: signature, oneTimeKeys: try requireOneTimeKeys(oneTime))
        guard Ed25519.verify(signature: Base64.decode(record.signedPreKeySignature)!, message: Base64.decode(record.signedPreKey)!,
                             publicKey: Base64.decode(record.identityKey)!) else {
            throw ChatAPIError.validation(["body", "signed_pre_key_signature"], "The signature does not verify under identity_key")
        }
        let identityChanged = state.bundles[record.deviceID]?.identityKey != record.identityKey
        state.putBundle(record)
        // A new device (or one with a new identity) is someone new to encrypt to.
        if identityChanged { deviceSetChanged(caller.userID, outputs: &outputs) }
        return .json(201, ["status": "ok"])
    }

    mutating func addOneTimeKeys(_ request: HTTPRequestMessage, caller: Caller) throws -> HTTPResponseMessage {
        let f = try fields(request)
        let deviceID: String, keys: [String]
        do {
            deviceID = try f.string("device_id")
            keys = try Self.oneTimeKeys(f)
        } catch { throw ChatAPIError.field(error) }
        try requireUUID(deviceID, ["body", "device_id"])
        let checked = try requireOneTimeKeys(keys)
        guard state.devices[deviceID]?.userID == caller.userID, state.bundles[deviceID] != nil else { throw ChatAPIError(404, "Key bundle not found") }
        state.bundles[deviceID]!.oneTimeKeys += checked
        return .json(201, ["status": "ok", "count": .number(Double(state.bundles[deviceID]!.oneTimeKeys.count))])
    }

    /// `one_time_pre_keys`: at most 200 strings per request.
    static func oneTimeKeys(_ f: JSONFields) throws(JSONFieldError) -> [String] {
        try f.array("one_time_pre_keys", limit: 200) { (v: JSONValue, path: String) throws(JSONFieldError) in
            guard let s = v.stringValue else { throw JSONFieldError(path: path, message: "must be a string") }
            return s
        }
    }

    /// Hands out a bundle, popping its oldest one-time key; warns the owner below the threshold.
    mutating func takeBundle(_ deviceID: String, outputs: inout [ChatOutput]) -> JSONValue? {
        guard var bundle = state.bundles[deviceID] else { return nil }
        let count = bundle.oneTimeKeys.count
        let oneTime = bundle.oneTimeKeys.isEmpty ? nil : bundle.oneTimeKeys.removeFirst()
        state.bundles[deviceID] = bundle
        if bundle.oneTimeKeys.count < config.lowOneTimeKeyThreshold {
            outputs += deliver(["type": "keys.low_otp", "device_id": .string(deviceID), "remaining": .number(Double(bundle.oneTimeKeys.count))],
                               users: [bundle.userID]) {
                $0.deviceID == deviceID
            }
        }
        return ["device_id": .string(deviceID), "user_id": .string(bundle.userID), "identity_key": .string(bundle.identityKey),
                "device_set_version": .number(Double(state.users[bundle.userID]?.deviceSetVersion ?? 0)),
                "signed_pre_key": .string(bundle.signedPreKey), "signed_pre_key_signature": .string(bundle.signedPreKeySignature),
                "one_time_pre_key": oneTime.map { .string(Base64.encode($0.bytes)) } ?? .null, "one_time_pre_key_count": .number(Double(count))]
    }

    /// `GET /keys/{user_id}/bundles`: one per device with keys (any user: a first DM
    /// needs them before the two share a channel); each hands out a one-time key.
    mutating func userBundles(_ userID: String, caller: Caller, now: Instant, outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        try requireUUID(userID, ["path", "user_id"])
        guard state.users[userID] != nil else { throw ChatAPIError(404, "User not found") }
        try limitBundleFetches(caller: caller, target: userID, now: now)
        return .json(200, .array(state.bundleDevices(of: userID).compactMap { takeBundle($0, outputs: &outputs) }))
    }

    mutating func deviceBundle(_ deviceID: String, caller: Caller, now: Instant, outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        try requireUUID(deviceID, ["path", "device_id"])
        if let owner = state.bundles[deviceID]?.userID { try limitBundleFetches(caller: caller, target: owner, now: now) }
        guard let bundle = takeBundle(deviceID, outputs: &outputs) else { throw ChatAPIError(404, "Key bundle not found") }
        return .json(200, bundle)
    }

    /// Each bundle handed out spends one of the owner's one-time keys, so fetches are
    /// limited per (requester, target user) and per requester: nobody can drain another
    /// user's keys, and a scraper is slowed across users.
    mutating func limitBundleFetches(caller: Caller, target: String, now: Instant) throws {
        guard target != caller.userID else { return }
        try rateLimit("bundles:\(caller.userID)|\(target)", capacity: config.bundleFetchesPerTargetPerMinute, now: now)
        try rateLimit("bundles:\(caller.userID)", capacity: config.bundleFetchesPerMinute, now: now)
    }

    // MARK: Channel key setup (members only, unlike d3chat)

    mutating func x3dhSetup(_ method: String, channelID: String, _ request: HTTPRequestMessage, caller: Caller) throws -> HTTPResponseMessage {
        _ = try memberChannel(channelID, caller)
        switch method {
        case "GET":
            guard let setup = state.x3dhSetups[channelID] else { throw ChatAPIError(404, "No X3DH setup data found") }
            return .json(200, setup)
        case "POST":
            let f = try fields(request)
            let identity: String, ephemeral: String, usedOneTime: Bool
            do {
                identity = try f.string("initiator_identity_key")
                ephemeral = try f.string("ephemeral_public_key")
                usedOneTime = try f.optionalBool("used_one_time_key") ?? false
            } catch { throw ChatAPIError.field(error) }
            try requireKey(identity, ["body", "initiator_identity_key"])
            try requireKey(ephemeral, ["body", "ephemeral_public_key"])
            state.x3dhSetups[channelID] = ["initiator_identity_key": .string(identity), "ephemeral_public_key": .string(ephemeral),
                                           "used_one_time_key": .bool(usedOneTime)]
            return .json(201, ["status": "ok"])
        default: throw ChatAPIError(405, "Method Not Allowed")
        }
    }

    /// Sender-key announcements hold the public signing key only: a `chain_key` is refused,
    /// because the profile distributes chain keys inside pairwise sessions.
    mutating func senderKeys(_ method: String, channelID: String, _ request: HTTPRequestMessage, caller: Caller,
                             outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        _ = try memberChannel(channelID, caller)
        func json(_ r: SenderKeyRecord) -> JSONValue {
            ["device_id": .string(r.deviceID), "sender_key_public": .string(r.senderKeyPublic), "message_number": .number(Double(r.messageNumber))]
        }
        switch method {
        case "GET":
            return .json(200, .array((state.senderKeys[channelID] ?? [:]).values.sorted { $0.deviceID < $1.deviceID }.map(json)))
        case "POST":
            let f = try fields(request)
            let deviceID: String, key: String, chainKey: String?
            do {
                deviceID = try f.string("device_id")
                key = try f.string("sender_key_public")
                chainKey = try f.optionalString("chain_key")
            } catch { throw ChatAPIError.field(error) }
            if let chainKey, !chainKey.isEmpty {
                throw ChatAPIError.validation(["body", "chain_key"], "Chain keys never go to the server; send them inside pairwise sessions")
            }
            guard state.devices[deviceID]?.userID == caller.userID else { throw ChatAPIError(404, "Device not found") }
            try requireKey(key, ["body", "sender_key_public"])
            let record = SenderKeyRecord(channelID: channelID, deviceID: deviceID, senderKeyPublic: key, messageNumber: 0)
            state.senderKeys[channelID, default: [:]][deviceID] = record
            outputs += deliver(["type": "sender_key.new", "channel_id": .string(channelID), "device_id": .string(deviceID),
                                "sender_username": .string(state.users[caller.userID]?.username ?? "")], users: memberIDs(channelID)) {
                $0.channels.contains(channelID)
            }
            return .json(201, json(record))
        default: throw ChatAPIError(405, "Method Not Allowed")
        }
    }
}
