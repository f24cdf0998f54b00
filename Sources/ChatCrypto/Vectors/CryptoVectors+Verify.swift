public import LabKernel
import LabCrypto

extension CryptoVectors {
    /// Replays every case of a vectors file from its seeds alone and lists what does not
    /// match (empty: the file is right for this implementation).
    public static func verify(_ file: JSONValue) -> [String] {
        var problems: [String] = []
        func hex(_ value: JSONValue?, _ what: String) -> [UInt8]? {
            guard let text = value?.stringValue, let bytes = [UInt8](hex: text) else { problems.append("\(what) is not hex"); return nil }
            return bytes
        }
        guard file["profile"]?.stringValue == profile else { return ["profile is not \(profile)"] }
        var setups: [X3DHCase] = []
        for (index, item) in (file["x3dh"]?.arrayValue ?? []).enumerated() {
            let at = "x3dh[\(index)]"
            guard let a = hex(item["alice_identity_seed"], at), let e = hex(item["alice_ephemeral_seed"], at),
                  let b = hex(item["bob_identity_seed"], at), let s = hex(item["bob_signed_prekey_seed"], at) else { continue }
            let o = item["bob_one_time_prekey_seed"] == .null ? nil : hex(item["bob_one_time_prekey_seed"], at)
            do {
                let setup = try X3DHCase(alice: a, ephemeral: e, bob: b, signedPreKey: s, oneTime: o)
                let expected = setup.json.objectValue ?? [:]
                for (name, value) in expected.sorted(by: { $0.key < $1.key }) where item[name] != value { problems.append("\(at): \(name) differs") }
                if try setup.responderAgreement.sharedKey != setup.agreement.sharedKey { problems.append("\(at): the responder derives another SK") }
                setups.append(setup)
            } catch { problems.append("\(at): \(error)") }
        }
        for (index, item) in (file["double_ratchet"]?.arrayValue ?? []).enumerated() {
            let at = "double_ratchet[\(index)]"
            guard let x3dh = item["x3dh"]?.numberValue.map(Int.init), setups.indices.contains(x3dh),
                  let first = hex(item["alice_first_ratchet_seed"], at), let list = item["messages"]?.arrayValue else {
                problems.append("\(at): needs x3dh, alice_first_ratchet_seed and messages"); continue
            }
            let messages = list.map { m in
                RatchetMessage(from: m["from"]?.stringValue ?? "", plaintext: m["plaintext"]?.stringValue ?? "",
                               newRatchetSeed: m["new_ratchet_seed"]?.stringValue.flatMap { [UInt8](hex: $0) },
                               deliverOrder: m["deliver_order"]?.numberValue.map(Int.init) ?? -1)
            }
            do {
                let (wires, seeds, keys) = try replay(setups[x3dh], firstRatchetSeed: first, messages) { messages[$0].newRatchetSeed ?? [] }
                for (n, m) in list.enumerated() {
                    let expected = ratchetIntermediates(wire: wires[n], messageKey: keys[n], associatedData: setups[x3dh].agreement.associatedData)
                    for (name, value) in expected.sorted(by: { $0.key < $1.key }) where m[name] != value {
                        problems.append("\(at).messages[\(n)]: \(name) differs")
                    }
                    if m["wire"]?.stringValue != wires[n].hexString { problems.append("\(at).messages[\(n)]: the wire differs") }
                    if (seeds[n] == nil) != (messages[n].newRatchetSeed == nil) { problems.append("\(at).messages[\(n)]: new_ratchet_seed is misplaced") }
                }
            } catch { problems.append("\(at): \(error)") }
        }
        for (index, item) in (file["sender_keys"]?.arrayValue ?? []).enumerated() {
            let at = "sender_keys[\(index)]"
            guard let channel = item["channel_id"]?.stringValue, let chainKey = hex(item["chain_key"], at),
                  let signing = hex(item["signing_seed"], at) else { continue }
            do {
                var chain = try SenderKeyChain(channelID: channel, chainKey: chainKey, signingSeed: signing)
                var receiver = SenderKeyReceiver(channelID: channel, distribution: chain.distribution)
                for (n, m) in (item["messages"]?.arrayValue ?? []).enumerated() {
                    let text = Array((m["plaintext"]?.stringValue ?? "").utf8)
                    guard let wire = hex(m["wire"], "\(at).messages[\(n)]") else { continue }
                    if m["iteration"]?.numberValue != Double(chain.iteration) { problems.append("\(at).messages[\(n)]: iteration differs") }
                    var seed: [UInt8] = []
                    let ours = chain.encrypt(text) { seed = Array($0) }
                    for (name, value) in groupIntermediates(wire: ours, seed: seed, channelID: channel).sorted(by: { $0.key < $1.key }) where m[name] != value {
                        problems.append("\(at).messages[\(n)]: \(name) differs")
                    }
                    if ours != wire { problems.append("\(at).messages[\(n)]: the wire differs") }
                    if try receiver.decrypt(wire) != text { problems.append("\(at).messages[\(n)]: decrypts to other text") }
                }
            } catch { problems.append("\(at): \(error)") }
        }
        return problems
    }
}
