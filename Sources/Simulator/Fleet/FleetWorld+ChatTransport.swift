import LabKernel
import SecureChatClient
import SecureChatServer

extension FleetWorld {
    /// One-way latency of a device's link now, or nil when it is offline.
    mutating func chatLatency(_ device: Int) -> TimeSpan? {
        let profile: LinkProfile
        switch devices[device].network {
        case .offline: return nil
        case .wifi: profile = scenario.links.wifi
        case .cellular: profile = scenario.links.cellular
        }
        let seconds = profile.latency.sample(using: &chatSim!.generator) + scenario.links.datacenter.latency.sample(using: &chatSim!.generator)
        return .nanoseconds(Int64(max(0, seconds) * 1e9))
    }

    mutating func chatSchedule(_ transit: ChatSimulation.Transit, after delay: TimeSpan, now: Instant, queue: inout EventQueue<Event>) {
        let slot = chatSim!.park(transit)
        queue.schedule(.chat(slot: slot), at: now + delay)
    }

    /// Feeds a client one input and carries out what it asks.
    mutating func chatInput(_ device: Int, _ input: ClientInput, now: Instant, queue: inout EventQueue<Event>) {
        // Out of the table while it runs, so its storage stays uniquely referenced and
        // mutates in place (a copy left behind would make every change copy it).
        guard var client = chatSim?.clients.removeValue(forKey: device) else { return }
        let effects = client.handle(input, now: now)
        let deadline = client.nextDeadline
        chatSim!.clients[device] = client
        // One pending wake-up per client, at its earliest deadline (a later one replaces it).
        if deadline != chatSim!.timerAt[device] {
            chatSim!.timerAt[device] = deadline
            let generation = (chatSim!.timerGeneration[device] ?? 0) &+ 1
            chatSim!.timerGeneration[device] = generation
            if let deadline { queue.schedule(.chatTimer(device: UInt32(device), generation: generation), at: max(now, deadline)) }
        }
        for effect in effects {
            switch effect {
            case .request(let id, var request):
                // Each phone is its own client address, as the server's per-address limits expect.
                request.peer = "device-\(device)"
                if let latency = chatLatency(device) {
                    chatSchedule(.request(device: device, id: id, request), after: latency, now: now, queue: &queue)
                } else {
                    chatSchedule(.input(device: device, .transportFailed(id: id)), after: .zero, now: now, queue: &queue)
                }
            case .openSocket(let ticket):
                if let latency = chatLatency(device) {
                    chatSchedule(.connect(device: device, ticket: ticket), after: latency, now: now, queue: &queue)
                } else {
                    chatSchedule(.input(device: device, .socketClosed(code: 1006)), after: .zero, now: now, queue: &queue)
                }
            case .socketSend(let text):
                if let latency = chatLatency(device) { chatSchedule(.frame(device: device, text), after: latency, now: now, queue: &queue) }
            case .closeSocket:
                if let connection = chatSim!.connectionOf.removeValue(forKey: device) {
                    chatSim!.deviceOfConnection[connection] = nil
                    chatSim!.server.disconnect(connection)
                }
            case .delivered(let message):
                chatDelivered(message, on: device, now: now)
            case .surfaced(let error):
                if case .decryptionFailed(let id, let reason) = error, chatSim!.firstFailure[device] == nil {
                    chatSim!.firstFailure[device] = "message \(id): \(reason)"
                }
            case .channelAdded, .channelRemoved, .invited, .typing, .presence, .historyLoaded, .loggedOut:
                break
            }
        }
    }

    mutating func chatTimerFired(_ device: Int, generation: UInt32, now: Instant, queue: inout EventQueue<Event>) {
        guard chatSim?.timerGeneration[device] == generation else { return }  // a later deadline replaced it
        chatSim!.timerAt[device] = nil
        chatInput(device, .timerFired, now: now, queue: &queue)
    }

    /// A message reached its reader (or its sender's acknowledgement came back).
    mutating func chatDelivered(_ message: ChatClientMessage, on device: Int, now: Instant) {
        let key = ChatSimulation.original(message.text)
        guard var record = chatSim!.sent[key] else { return }
        if let retired = chatSim!.retiredAt[device], let invariant = chatSim!.invariants.removedReadNothing {
            invariants.check(invariant, record.at <= retired,
                             "device \(device), removed at \(retired), decrypted \(message.text) sent at \(record.at)")
        }
        let kind = record.group ? 1 : 0
        if message.senderDeviceID == chatSim!.clients[device]?.deviceID {
            guard !record.acked else { return }
            record.acked = true
            recorder.add(chatSim!.metrics.messages[kind])
            recorder.observe(chatSim!.metrics.ackLatency[kind], UInt64(max(0, (now - record.at).nanoseconds)))
        } else if record.pending.remove(device) != nil {
            recorder.observe(chatSim!.metrics.deliveryLatency[kind], UInt64(max(0, (now - record.at).nanoseconds)))
        }
        chatSim!.sent[key] = record
    }

    mutating func chatArrived(_ slot: UInt32, now: Instant, queue: inout EventQueue<Event>) {
        guard let transit = chatSim?.transits.removeValue(forKey: slot) else { return }
        switch transit {
        case .input(let device, let input):
            chatInput(device, input, now: now, queue: &queue)
        case .request(let device, let id, let request):
            let reply = chatSim!.server.handle(request, now: now)
            if reply.response.status == 201, request.method == "POST", request.path.hasSuffix("/keys/upload") { chatSim!.keysAt[device] = now }
            chatServerEnded(request, by: device, reply.response, now: now)
            chatRoute(reply.outputs, now: now, queue: &queue)
            if let latency = chatLatency(device) {
                chatSchedule(.input(device: device, .response(id: id, reply.response)), after: latency, now: now, queue: &queue)
            } else {
                chatInput(device, .transportFailed(id: id), now: now, queue: &queue)
            }
        case .connect(let device, let ticket):
            switch chatSim!.server.connect(ticket: ticket, now: now) {
            case .accepted(let connection):
                guard let latency = chatLatency(device) else {
                    chatSim!.server.disconnect(connection)
                    return chatInput(device, .socketClosed(code: 1006), now: now, queue: &queue)
                }
                chatSim!.connectionOf[device] = connection
                chatSim!.deviceOfConnection[connection] = device
                chatSchedule(.input(device: device, .socketOpened), after: latency, now: now, queue: &queue)
            case .refused(let code, _):
                chatInput(device, .socketClosed(code: code), now: now, queue: &queue)
            }
        case .frame(let device, let text):
            guard let connection = chatSim!.connectionOf[device] else { return }
            chatRoute(chatSim!.server.receive(connection, text: text, now: now), now: now, queue: &queue)
        }
    }

    /// The server's frames and closes, each over its device's link.
    mutating func chatRoute(_ outputs: [ChatOutput], now: Instant, queue: inout EventQueue<Event>) {
        for output in outputs {
            switch output {
            case .send(let connection, let payload):
                guard let device = chatSim!.deviceOfConnection[connection], let latency = chatLatency(device) else { continue }
                if payload["type"] == "typing.start" { recorder.add(chatSim!.metrics.typing) }
                // A socket is one ordered stream: a frame never overtakes the one before it.
                let arrival = max(now + latency, chatSim!.socketArrival[device] ?? now)
                chatSim!.socketArrival[device] = arrival
                chatSchedule(.input(device: device, .socketText(payload.canonicalText)), after: arrival - now, now: now, queue: &queue)
            case .close(let connection, let code, _):
                guard let device = chatSim!.deviceOfConnection.removeValue(forKey: connection) else { continue }
                chatSim!.connectionOf[device] = nil
                chatSchedule(.input(device: device, .socketClosed(code: code)), after: .zero, now: now, queue: &queue)
            }
        }
    }

    /// A device went offline: its socket drops (the client schedules its reconnect).
    mutating func chatNetworkChanged(_ device: Int, to state: NetworkState, now: Instant, queue: inout EventQueue<Event>) {
        guard state == .offline, chatSim != nil, let connection = chatSim!.connectionOf.removeValue(forKey: device) else { return }
        chatSim!.deviceOfConnection[connection] = nil
        chatSim!.server.disconnect(connection)
        chatInput(device, .socketClosed(code: 1006), now: now, queue: &queue)
    }

    /// Bucket end: connected devices, and the clients' counters since the last bucket.
    mutating func recordChatBucket() {
        guard chatSim != nil else { return }
        let sim = chatSim!
        recorder.set(sim.metrics.connected, Double(sim.connectionOf.count))
        var decrypted = 0, failures = 0, reconnects = 0, replenished = 0, refreshes = 0
        for (device, client) in sim.clients {
            let before = sim.recordedStats[device] ?? ChatClient.Stats()
            decrypted += client.stats.decrypted - before.decrypted
            failures += client.stats.decryptionFailures - before.decryptionFailures
            reconnects += client.stats.reconnects - before.reconnects
            replenished += client.stats.replenished - before.replenished
            refreshes += client.stats.refreshes - before.refreshes
            chatSim!.recordedStats[device] = client.stats
        }
        recorder.add(sim.metrics.decrypted, Double(decrypted))
        recorder.add(sim.metrics.failures, Double(failures))
        recorder.add(sim.metrics.reconnects, Double(reconnects))
        recorder.add(sim.metrics.replenished, Double(replenished))
        recorder.add(sim.metrics.refreshes, Double(refreshes))
    }

    /// End of run: every reader that is connected has read every message sent more than
    /// ten minutes ago; no failures; each sender's order kept; no duplicates; no
    /// plaintext in the server's store.
    mutating func checkChatInvariants(at now: Instant) {
        guard let sim = chatSim else { return }
        let ids = sim.invariants
        for (text, record) in sim.sent.sorted(by: { $0.key < $1.key }) where now - record.at > .minutes(10) {
            // Only what the server accepted is expected of readers; what it refused (the user
            // had left by the time the queue sent it) settles as a refusal.
            if record.acked {
                let missing = record.pending.filter { sim.connectionOf[$0] != nil }
                invariants.check(ids.everyMemberReads, missing.isEmpty, "\(text): connected devices \(missing.sorted()) never decrypted it")
            }
            // Nothing waits for ever in a connected sender's queue.
            let sender = Int(text.split(separator: ".")[1].dropFirst()) ?? -1
            let stuck = !record.acked && sim.connectionOf[sender] != nil
                && (sim.clients[sender]?.snapshot.pending.contains { ChatSimulation.original($0.text) == text } ?? false)
            invariants.check(ids.sendsSettle, !stuck, "\(text): still queued at its connected sender \(sender) after \(now - record.at)")
        }
        for (device, client) in sim.clients.sorted(by: { $0.key < $1.key }) {
            invariants.check(ids.noDecryptionFailure, client.stats.decryptionFailures == 0,
                             "device \(device): \(client.stats.decryptionFailures) messages failed to decrypt (first: \(sim.firstFailure[device] ?? "?"))")
            for channel in client.snapshot.timelines.keys.sorted() {
                let line = client.timeline(channel)
                invariants.check(ids.noDuplicates, Set(line.map(\.id)).count == line.count, "device \(device): a message twice in \(channel)")
                var last: [String: Int] = [:]
                for message in line {
                    let parts = ChatSimulation.original(message.text).split(separator: ".")
                    guard parts.count == 3, let n = Int(parts[2]) else { continue }
                    let sender = String(parts[1])
                    invariants.check(ids.perSenderOrder, n > (last[sender] ?? 0), "device \(device): \(message.text) after \(sender).\(last[sender] ?? 0)")
                    last[sender] = n
                }
            }
        }
        if let invariant = ids.removedReadNothing {
            for (device, retired) in sim.retiredAt.sorted(by: { $0.key < $1.key }) {
                let late = (sim.clients[device].map { client in client.snapshot.channels.keys.flatMap { client.timeline($0) } } ?? [])
                    .filter { (sim.sent[ChatSimulation.original($0.text)]?.at ?? .zero) > retired }
                invariants.check(invariant, late.isEmpty, "device \(device), removed at \(retired), holds \(late.map(\.text).sorted().prefix(3))")
            }
        }
        for message in sim.server.state.messages.values.sorted(by: { $0.id < $1.id }) {
            invariants.check(ids.noPlaintextOnServer, message.protocolVersion == 2 && !message.content.contains(".d"),
                             "message \(message.id) is stored readable")
        }
    }
}
