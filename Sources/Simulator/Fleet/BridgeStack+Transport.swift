import AIBridgeClient
import AIBridgeDaemon
import AIBridgeRelay
import AIBridgeWire
import LabKernel

/// How phones, the relay and the desktops' daemons reach one another.
extension BridgeStack {
    mutating func schedule(_ transit: Transit, at time: Instant, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        queue.schedule(.aiBridge(.transit(slot: transits.park(transit))), at: max(now, time))
    }

    /// A desktop's link to the relay: home Wi-Fi, then the datacenter.
    mutating func deskLatency(_ user: Int, fleet: Fleet) -> TimeSpan {
        let seconds = fleet.links.latency(.wifi, using: &desks[user].link) + fleet.links.latency(.datacenter, using: &desks[user].link)
        return .nanoseconds(Int64(max(0, seconds) * 1e9))
    }

    // MARK: Phones

    /// Feeds a phone's client and carries out what it asks.
    mutating func feed(_ device: Int, _ input: BridgeClientInput, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard var client = clients.removeValue(forKey: device) else { return }
        let effects = client.handle(input, now: now)
        let deadline = client.nextDeadline
        clients[device] = client
        if deadline != phones[device]!.timerAt {
            phones[device]!.timerAt = deadline
            phones[device]!.timerGeneration &+= 1
            if let deadline { queue.schedule(.aiBridge(.phoneTimer(device: UInt32(device), generation: phones[device]!.timerGeneration)), at: max(now, deadline)) }
        }
        let session = phones[device]!.session
        for effect in effects {
            switch effect {
            case .request(let id, var request):
                request.peer = "phone-\(device)"
                let pair = request.path == "/v1/pair/confirm"
                phones[device]!.started[id] = (now, pair, pair ? 0 : phones[device]!.promptWords, false)
                endpoints.began(device, id: id, route: "POST \(request.path)", now: now, recorder: &fleet.recorder)
                transfer(device, bytes: request.wireSize, .up, now: now, queue: &queue, fleet: &fleet)
                if let latency = links.latency(device, fleet: &fleet) {
                    schedule(.request(device: device, session: session, id: id, request), at: now + latency, now: now, queue: &queue)
                } else {
                    schedule(.phone(device: device, session: session, .transportFailed(id: id)), at: now, now: now, queue: &queue)
                }
            case .cancelRequest(let id):
                phones[device]!.started[id] = nil
                endpoints.forget(device)
                if let exchange = exchanges.first(where: { $0.value.device == device && $0.value.id == id })?.key {
                    exchanges[exchange] = nil
                    carryOut(relay.exchangeAbandoned(exchange), now: now, queue: &queue, fleet: &fleet)
                }
            case .chunk(let id, let text):
                phones[device]!.text[id, default: ""] += text
                if let started = phones[device]!.started[id], !started.firstChunk {
                    phones[device]!.started[id]!.firstChunk = true
                    fleet.recorder.observe(metrics.firstChunk, UInt64(max(0, (now - started.at).nanoseconds)))
                }
            case .finished(let id, let value):
                ended(device, id, error: nil, value: value, now: now, queue: &queue, fleet: &fleet)
            case .failed(let id, let error):
                ended(device, id, error: error, value: nil, now: now, queue: &queue, fleet: &fleet)
            case .paired:
                // A pairing has no answer text: it ends when its token is in the keychain.
                if let id = phones[device]!.started.first(where: { $0.value.pair })?.key {
                    ended(device, id, error: nil, value: nil, now: now, queue: &queue, fleet: &fleet)
                }
            case .started, .keychainChanged:
                break
            }
        }
    }

    mutating func transfer(_ device: Int, bytes: Int, _ direction: EnergyLedger.Direction, now: Instant, queue: inout EventQueue<FleetWorld.Event>,
                           fleet: inout Fleet) {
        guard !provisioning else { return }
        fleet.transfer(device, bytes: bytes, direction, stack: .aiBridge, at: now, queue: &queue)
        fleet.compute(device, millijoules: fleet.energy.settings.cpu.kilobyte * Double(bytes) / 1_024, stack: .aiBridge, at: now, queue: &queue)
    }

    // MARK: Desktops

    /// Feeds a daemon and carries out what it asks.
    mutating func feed(daemon user: Int, _ input: DaemonInput, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        let effects = desks[user].daemon.handle(input, now: now)
        let deadline = desks[user].daemon.nextDeadline
        if deadline != desks[user].timerAt {
            desks[user].timerAt = deadline
            desks[user].timerGeneration &+= 1
            if let deadline { queue.schedule(.aiBridge(.daemonTimer(user: UInt32(user), generation: desks[user].timerGeneration)), at: max(now, deadline)) }
        }
        for effect in effects {
            switch effect {
            case .connect:
                desks[user].run &+= 1
                schedule(.dial(user: user, run: desks[user].run), at: now + deskLatency(user, fleet: fleet), now: now, queue: &queue)
            case .send(let text):
                guard desks[user].tunnel != nil else { continue }
                let arrival = max(now + deskLatency(user, fleet: fleet), desks[user].outbound)
                desks[user].outbound = arrival
                schedule(.toRelay(user: user, run: desks[user].run, text), at: arrival, now: now, queue: &queue)
            case .disconnect:
                closeTunnel(user, now: now, queue: &queue, fleet: &fleet)
            case .startCommand(let run, _, _, _):
                // Scenarios give daemons the scripted model; a program cannot run here.
                feed(daemon: user, .backendFinished(run: run, status: -1, reason: "no programs in a simulation"), now: now, queue: &queue, fleet: &fleet)
            case .stopCommand, .pairingOffered, .pairingClosed, .paired, .refused:
                break
            }
        }
    }

    /// The daemon's tunnel is gone (it slept, restarted): the relay ends its exchanges.
    mutating func closeTunnel(_ user: Int, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        desks[user].run &+= 1
        guard let tunnel = desks[user].tunnel else { return }
        desks[user].tunnel = nil
        userOfTunnel[tunnel] = nil
        carryOut(relay.tunnelClosed(tunnel, now: now), now: now, queue: &queue, fleet: &fleet)
    }

    // MARK: The relay

    mutating func arrived(_ slot: UInt32, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard let transit = transits.take(slot) else { return }
        switch transit {
        case .phone(let device, let session, let input):
            guard phones[device]?.session == session else { return }
            switch input {
            case .response(let id, let response):
                transfer(device, bytes: response.wireSize, .down, now: now, queue: &queue, fleet: &fleet)
                endpoints.answered(device, id: id, status: response.status, now: now, recorder: &fleet.recorder)
            case .streamHead(let id, let status, _): endpoints.answered(device, id: id, status: status, now: now, recorder: &fleet.recorder)
            case .streamBody(_, let bytes): transfer(device, bytes: bytes.count, .down, now: now, queue: &queue, fleet: &fleet)
            case .transportFailed(let id): endpoints.failed(device, id: id, recorder: &fleet.recorder)
            default: break
            }
            feed(device, input, now: now, queue: &queue, fleet: &fleet)
        case .request:
            if provisioning { return serve(transit, now: now, queue: &queue, fleet: &fleet) }
            switch serving.admit(transit, now: now, wait: metrics.relayWait, recorder: &fleet.recorder) {
            case .serving(let ticket, let epoch, let done): queue.schedule(.aiBridge(.serviceDone(slot: ticket, epoch: epoch)), at: done)
            case .queued: break
            case .refused(let transit):
                guard case .request(let device, let session, let id, _) = transit else { return }
                let answer = HTTPResponseMessage.json(503, ["error": "relay_overloaded"], headers: [HTTPHeader("Retry-After", "5")])
                schedule(.phone(device: device, session: session, .response(id: id, answer)), at: now + (links.latency(device, fleet: &fleet) ?? .zero),
                         now: now, queue: &queue)
            case .down(let transit):
                // A relay that is down refuses the connection.
                guard case .request(let device, let session, let id, _) = transit else { return }
                schedule(.phone(device: device, session: session, .transportFailed(id: id)), at: now, now: now, queue: &queue)
            }
        case .dial(let user, let run):
            guard desks[user].run == run, desks[user].awake else { return }
            let (tunnel, reply) = relay.tunnelOpened(now: now)
            desks[user].tunnel = tunnel
            userOfTunnel[tunnel] = user
            feed(daemon: user, .tunnelOpened, now: now, queue: &queue, fleet: &fleet)
            carryOut(reply, now: now, queue: &queue, fleet: &fleet)
        case .toRelay(let user, let run, let text):
            guard desks[user].run == run, let tunnel = desks[user].tunnel else { return }
            carryOut(relay.tunnelReceived(tunnel, text: text, now: now), now: now, queue: &queue, fleet: &fleet)
        case .toDaemon(let user, let run, let text):
            guard desks[user].run == run else { return }
            feed(daemon: user, .tunnelText(text), now: now, queue: &queue, fleet: &fleet)
        }
    }

    mutating func served(_ ticket: UInt32, epoch: UInt32, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard serving.pool.epoch == epoch else { return }
        if let transit = serving.finish(ticket, epoch: epoch, now: now) { serve(transit, now: now, queue: &queue, fleet: &fleet) }
        for next in serving.startWaiting(now: now, wait: metrics.relayWait, recorder: &fleet.recorder) {
            queue.schedule(.aiBridge(.serviceDone(slot: next.ticket, epoch: next.epoch)), at: next.done)
        }
    }

    /// The relay core handles a phone's request.
    mutating func serve(_ transit: Transit, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard case .request(let device, let session, let id, let request) = transit else { return }
        let reply = relay.handle(request, now: now)
        if let exchange = reply.pending {
            exchanges[exchange] = (device, session, id)
        } else {
            toPhone(device, session, .response(id: id, reply.response), now: now, queue: &queue, fleet: &fleet)
        }
        carryOut(reply, now: now, queue: &queue, fleet: &fleet)
    }

    /// Something for a phone, over its link, after what went before it.
    mutating func toPhone(_ device: Int, _ session: UInt32, _ input: BridgeClientInput, now: Instant, queue: inout EventQueue<FleetWorld.Event>,
                          fleet: inout Fleet) {
        guard let latency = links.latency(device, fleet: &fleet) else {
            if case .streamBody = input { return }
            let id: Int? = {
                switch input {
                case .response(let id, _), .streamHead(let id, _, _), .streamEnd(let id): return id
                default: return nil
                }
            }()
            if let id { schedule(.phone(device: device, session: session, .transportFailed(id: id)), at: now, now: now, queue: &queue) }
            return
        }
        schedule(.phone(device: device, session: session, input), at: links.socketArrival(device, latency: latency, now: now), now: now, queue: &queue)
    }

    /// What the relay asked for: answers and stream pieces to phones, frames to daemons.
    mutating func carryOut(_ reply: RelayReply, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        for output in reply.outputs {
            switch output {
            case .respond(let exchange, let response):
                guard let (device, session, id) = exchanges.removeValue(forKey: exchange) else { continue }
                toPhone(device, session, .response(id: id, response), now: now, queue: &queue, fleet: &fleet)
            case .streamOpen(let exchange):
                guard let (device, session, id) = exchanges[exchange] else { continue }
                toPhone(device, session, .streamHead(id: id, status: 200, headers: [HTTPHeader("Content-Type", "text/event-stream")]), now: now,
                        queue: &queue, fleet: &fleet)
            case .streamEvent(let exchange, let event):
                guard let (device, session, id) = exchanges[exchange] else { continue }
                toPhone(device, session, .streamBody(id: id, ServerSentEvents.encode(event)), now: now, queue: &queue, fleet: &fleet)
            case .streamClose(let exchange):
                guard let (device, session, id) = exchanges.removeValue(forKey: exchange) else { continue }
                toPhone(device, session, .streamEnd(id: id), now: now, queue: &queue, fleet: &fleet)
            case .tunnelSend(let tunnel, let text):
                guard let user = userOfTunnel[tunnel] else { continue }
                checkSealed(text, fleet: &fleet)
                let arrival = max(now + deskLatency(user, fleet: fleet), desks[user].inbound)
                desks[user].inbound = arrival
                schedule(.toDaemon(user: user, run: desks[user].run, text), at: arrival, now: now, queue: &queue)
            case .tunnelClose(let tunnel, _, _):
                guard let user = userOfTunnel.removeValue(forKey: tunnel) else { continue }
                desks[user].tunnel = nil
                desks[user].run &+= 1
                feed(daemon: user, .tunnelClosed, now: now, queue: &queue, fleet: &fleet)
            }
        }
        armRelayTimer(now: now, queue: &queue)
    }

    /// A request the relay forwards: a sealed phone's words must not be in it.
    mutating func checkSealed(_ text: String, fleet: inout Fleet) {
        guard text.hasPrefix(#"{"body":"#) || text.contains(#""type":"request""#) else { return }
        let readable = text.contains("prompt-from-phone-")
        let sealed = text.contains(#""sealed""#)
        fleet.invariants.check(invariants.sealedUnread, !(sealed && readable), "a sealed request crossed the relay readable")
    }

    mutating func armRelayTimer(now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        let deadline = relay.nextDeadline
        guard deadline != relayTimerAt else { return }
        relayTimerAt = deadline
        relayTimerGeneration &+= 1
        if let deadline { queue.schedule(.aiBridge(.relayTimer(generation: relayTimerGeneration)), at: max(now, deadline)) }
    }
}

extension BridgeStack {
    /// The relay crashes (or comes back): tunnels and exchanges go, what waited for a worker
    /// is lost; daemons dial again (their backoff), phones see 503s meanwhile.
    mutating func setRelayDown(_ down: Bool, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        serving.setDown(down, now: now)
        guard down else { return }
        for user in desks.indices where desks[user].tunnel != nil {
            closeTunnel(user, now: now, queue: &queue, fleet: &fleet)
            feed(daemon: user, .tunnelClosed, now: now, queue: &queue, fleet: &fleet)
        }
    }
}
