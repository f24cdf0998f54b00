import AIBridgeWire
import LabCrypto
public import LabKernel

/// The daemon's side: tunnels opening, proving who they are, and answering exchanges.
extension BridgeRelay {
    /// A daemon dialed `/v1/tunnel`: its connection id, and the challenge to send.
    public mutating func tunnelOpened(now: Instant) -> (tunnel: Int, reply: RelayReply) {
        let id = state.nextTunnel
        state.nextTunnel += 1
        let nonce = generator.bytes(32)
        state.tunnels[id] = Tunnel(challenge: nonce)
        var reply = RelayReply()
        reply.send(id, .challenge(nonce: nonce))
        return (id, reply)
    }

    public mutating func tunnelReceived(_ tunnel: Int, text: String, now: Instant) -> RelayReply {
        var reply = RelayReply()
        guard let connection = state.tunnels[tunnel] else { return reply }
        guard let message = TunnelMessage(text: text) else {
            // A daemon that speaks nonsense is cut off; its exchanges end as it goes.
            reply.outputs.append(.tunnelClose(tunnel: tunnel, code: 4400, reason: "malformed tunnel message"))
            reply = merge(reply, tunnelClosed(tunnel, now: now))
            return reply
        }
        guard let daemon = connection.daemonID else {
            guard case .hello(let id, let identity, let server, let signature) = message else {
                reply.outputs.append(.tunnelClose(tunnel: tunnel, code: 4401, reason: "say hello first"))
                state.tunnels[tunnel] = nil
                return reply
            }
            hello(tunnel, connection, id: id, identity: identity, server: server, signature: signature, now: now, &reply)
            return reply
        }
        switch message {
        case .pairingOpen(let session, let pin, _):
            guard pin.utf8.count == 6, pin.utf8.allSatisfy({ (48...57).contains($0) }), !session.isEmpty, session.utf8.count <= 128 else { break }
            // One open session per daemon: a new one replaces the last.
            state.closeSessions(of: daemon)
            state.sessions[session] = PairingSession(daemonID: daemon, pin: pin, expiresAt: now + config.pairingLifetime, failures: 0)
        case .pairingClose(let session):
            if state.sessions[session]?.daemonID == daemon { state.sessions[session] = nil }
        case .pairIssued(let id, let token, let key):
            guard let exchange = exchange(id, of: daemon), case .pair(let device) = exchange.kind, !exchange.streaming else { break }
            state.exchanges[id] = nil
            guard key == state.daemons[daemon]?.serverPublicKey else {
                reply.outputs.append(.respond(exchange: id, BridgeFailure.invalidPIN.response))
                break
            }
            issue(token, daemon: daemon, device: device, key: key, now: now, &reply)
            reply.outputs.append(.respond(exchange: id, .json(200, [
                "token": .string(token), "server_public_key": .string(Base64.encode(key)), "worker_url": .string(config.workerURL),
                "daemon_id": .string(daemon), "device_id": .string(device),
            ])))
        case .pairRefused(let id, _):
            guard exchange(id, of: daemon) != nil else { break }
            state.exchanges[id] = nil
            reply.outputs.append(.respond(exchange: id, BridgeFailure.invalidPIN.response))
        case .response(let id, let status, let body):
            guard let exchange = exchange(id, of: daemon), !exchange.streaming else { break }
            state.exchanges[id] = nil
            reply.outputs.append(.respond(exchange: id, .json(status, body)))
        case .streamStart(let id):
            guard var exchange = exchange(id, of: daemon), !exchange.streaming, case .chat = exchange.kind else { break }
            exchange.streaming = true
            exchange.deadline = now + config.idleLimit
            state.exchanges[id] = exchange
            reply.outputs.append(.streamOpen(exchange: id))
        case .streamChunk(let id, let data):
            guard exchange(id, of: daemon)?.streaming == true else { break }
            state.exchanges[id]!.deadline = now + config.idleLimit
            reply.outputs.append(.streamEvent(exchange: id, ServerSentEvents.Event("chunk", data.canonicalText)))
        case .streamEnd(let id, let data):
            guard exchange(id, of: daemon)?.streaming == true else { break }
            state.exchanges[id] = nil
            reply.outputs.append(.streamEvent(exchange: id, ServerSentEvents.Event("done", data.canonicalText)))
            reply.outputs.append(.streamClose(exchange: id))
        case .streamError(let id, let error, let message):
            guard let exchange = exchange(id, of: daemon) else { break }
            state.exchanges[id] = nil
            if exchange.streaming {
                reply.outputs.append(.streamEvent(exchange: id, ServerSentEvents.Event("error", JSONValue.object(["error": .string(error), "message": .string(message)]).canonicalText)))
                reply.outputs.append(.streamClose(exchange: id))
            } else {
                reply.outputs.append(.respond(exchange: id, .json(502, ["error": .string(error), "message": .string(message)])))
            }
        case .challenge, .hello, .welcome, .pairingClosed, .pairIssue, .request, .cancel:
            break  // the relay's own messages, or a second hello: ignored
        }
        return reply
    }

    /// An exchange of `daemon` (a daemon cannot answer another's).
    func exchange(_ id: Int, of daemon: String) -> Exchange? {
        guard let exchange = state.exchanges[id], exchange.daemonID == daemon else { return nil }
        return exchange
    }

    /// A hello: the signature over the challenge must verify under the identity key, which
    /// must be the one this daemon id first came with. A new pairing key revokes every token
    /// issued under the old one. A second tunnel of the same daemon replaces the first.
    mutating func hello(_ tunnel: Int, _ connection: Tunnel, id: String, identity: [UInt8], server: [UInt8], signature: [UInt8], now: Instant,
                        _ reply: inout RelayReply) {
        let signed = TunnelMessage.signedHello(nonce: connection.challenge, serverPublicKey: server)
        guard Ed25519.verify(signature: signature, message: signed, publicKey: identity) else {
            reply.outputs.append(.tunnelClose(tunnel: tunnel, code: 4401, reason: "bad signature"))
            state.tunnels[tunnel] = nil
            return
        }
        if let known = state.daemons[id], known.identityKey != identity {
            reply.outputs.append(.tunnelClose(tunnel: tunnel, code: 4401, reason: "this daemon id belongs to another key"))
            state.tunnels[tunnel] = nil
            return
        }
        var revoked = 0
        if let known = state.daemons[id], known.serverPublicKey != server {
            for hash in state.tokens.filter({ $0.value.daemonID == id }).keys.sorted() {
                let record = state.tokens.removeValue(forKey: hash)!
                state.tokenOfDevice[id + "|" + record.deviceID] = nil
                reply.changes.append(.token(hash: hash, nil))
                revoked += 1
            }
        }
        let record = DaemonRecord(id: id, identityKey: identity, serverPublicKey: server, firstSeen: state.daemons[id]?.firstSeen ?? now)
        if state.daemons[id] != record {
            state.daemons[id] = record
            reply.changes.append(.daemon(record))
        }
        if let previous = state.tunnelOfDaemon[id], previous != tunnel {
            reply.outputs.append(.tunnelClose(tunnel: previous, code: 4409, reason: "replaced by a newer tunnel"))
            reply = merge(reply, tunnelClosed(previous, now: now))
        }
        state.tunnels[tunnel]?.daemonID = id
        state.tunnelOfDaemon[id] = tunnel
        reply.send(tunnel, .welcome(daemonID: id, revoked: revoked))
    }

    /// A token issued: stored as its hash, replacing the device's previous token.
    mutating func issue(_ token: String, daemon: String, device: String, key: [UInt8], now: Instant, _ reply: inout RelayReply) {
        let hash = Self.hash(token)
        if let old = state.tokenOfDevice[daemon + "|" + device], old != hash {
            state.tokens[old] = nil
            reply.changes.append(.token(hash: old, nil))
        }
        let record = TokenRecord(daemonID: daemon, deviceID: device, serverPublicKey: key, issuedAt: now)
        state.tokens[hash] = record
        state.tokenOfDevice[daemon + "|" + device] = hash
        reply.changes.append(.token(hash: hash, record))
    }

    /// A tunnel went away: its daemon's exchanges end (503 before a stream began, an error
    /// event after) and its pairing sessions close.
    public mutating func tunnelClosed(_ tunnel: Int, now: Instant) -> RelayReply {
        var reply = RelayReply()
        guard let connection = state.tunnels.removeValue(forKey: tunnel), let daemon = connection.daemonID,
              state.tunnelOfDaemon[daemon] == tunnel else { return reply }
        state.tunnelOfDaemon[daemon] = nil
        for id in state.exchanges.filter({ $0.value.tunnel == tunnel }).keys.sorted() {
            end(id, state.exchanges.removeValue(forKey: id)!, with: .bridgeOffline, &reply)
        }
        state.closeSessions(of: daemon)
        return reply
    }

    func merge(_ a: RelayReply, _ b: RelayReply) -> RelayReply {
        var merged = a
        merged.outputs += b.outputs
        merged.changes += b.changes
        return merged
    }
}
