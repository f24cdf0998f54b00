import LabKernel
import SecureChatClient
import SecureChatServer

extension ChatStack {
    /// One-way latency of a device's link now, or nil when it is offline.
    mutating func latency(_ device: Int, fleet: inout Fleet) -> TimeSpan? { links.latency(device, fleet: &fleet) }

    mutating func schedule(_ transit: ChatStack.Transit, after delay: TimeSpan, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        let slot = transits.park(transit)
        queue.schedule(.chat(.transit(slot: slot)), at: now + delay)
    }

    /// The device's current client run.
    func currentSession(_ device: Int) -> UInt32 { session[device] ?? 0 }

    /// Feeds a running client one input and carries out what it asks.
    mutating func feed(_ device: Int, _ input: ClientInput, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard awakeSince[device] != nil else { return }
        // Out of the table while it runs, so its storage stays uniquely referenced and
        // mutates in place (a copy left behind would make every change copy it).
        guard var client = self.clients.removeValue(forKey: device) else { return }
        let before = client.stats
        let effects = client.handle(input, now: now)
        let deadline = client.nextDeadline
        let after = client.stats
        clients[device] = client
        let cpu = fleet.energy.settings.cpu
        let crypto = provisioning ? 0 : Double(after.handshakes - before.handshakes) * cpu.handshake + Double(after.signatures - before.signatures) * cpu.sign
            + Double(after.verifications - before.verifications) * cpu.verify
        fleet.compute(device, millijoules: crypto, stack: .chat, at: now, queue: &queue)
        // One pending wake-up per client, at its earliest deadline (a later one replaces it).
        if deadline != timerAt[device] {
            timerAt[device] = deadline
            let generation = (timerGeneration[device] ?? 0) &+ 1
            timerGeneration[device] = generation
            if let deadline { queue.schedule(.chat(.timer(device: UInt32(device), generation: generation)), at: max(now, deadline)) }
        }
        let run = currentSession(device)
        for effect in effects {
            switch effect {
            case .request(let id, var request):
                // Each phone is its own client address, as the server's per-address limits expect.
                request.peer = "device-\(ordinal[device]!)"
                if !provisioning { endpoints.began(device, id: id, route: request.route, now: now, recorder: &fleet.recorder) }
                send(device, bytes: request.wireSize, now: now, queue: &queue, fleet: &fleet)
                if let latency = latency(device, fleet: &fleet) {
                    schedule(.request(device: device, session: run, id: id, request), after: latency, now: now, queue: &queue)
                } else {
                    schedule(.input(device: device, session: run, .transportFailed(id: id)), after: .zero, now: now, queue: &queue)
                }
            case .openSocket(let ticket):
                send(device, bytes: Self.socketHandshakeBytes, now: now, queue: &queue, fleet: &fleet)
                if let latency = latency(device, fleet: &fleet) {
                    schedule(.connect(device: device, session: run, socket: links.socket(device), ticket: ticket), after: latency, now: now, queue: &queue)
                } else {
                    schedule(.input(device: device, session: run, .socketClosed(code: 1006)), after: .zero, now: now, queue: &queue)
                }
            case .socketSend(let text):
                send(device, bytes: text.utf8.count + Self.frameOverhead, now: now, queue: &queue, fleet: &fleet)
                if let latency = latency(device, fleet: &fleet), let connection = connectionOf[device] {
                    schedule(.frame(device: device, session: run, connection: connection, text), after: latency, now: now, queue: &queue)
                }
            case .closeSocket:
                if let connection = connectionOf.removeValue(forKey: device) {
                    deviceOfConnection[connection] = nil
                    server.disconnect(connection)
                }
                links.socketGone(device)
                awaitingOpening.remove(device)
            case .delivered(let message):
                delivered(message, on: device, now: now, fleet: &fleet)
            case .surfaced(let error):
                if case .decryptionFailed(let id, let reason) = error, firstFailure[device] == nil {
                    firstFailure[device] = "message \(id): \(reason)"
                }
            case .loggedOut:
                // Unless a logout-all on another device asked for it, the user did not: the
                // server ended the session, e.g. a refresh whose answer the app never got,
                // presented again after the grace. Either way the next login is a new device.
                if active.contains(device) { sessionEnded(device, asked: loggingOut.remove(device) != nil, fleet: &fleet) }
            case .channelAdded, .channelRemoved, .invited, .typing, .presence, .historyLoaded:
                break
            }
        }
    }

    /// A WebSocket upgrade, and what each frame adds to its text (header and mask).
    static let socketHandshakeBytes = 420
    static let frameOverhead = 8

    /// Bytes a device sends: its radio's energy and the CPU to encode them (none while
    /// provisioning: that traffic happened before the run).
    mutating func send(_ device: Int, bytes: Int, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard !provisioning else { return }
        fleet.transfer(device, bytes: bytes, .up, stack: .chat, at: now, queue: &queue)
        fleet.compute(device, millijoules: fleet.energy.settings.cpu.kilobyte * Double(bytes) / 1_024, stack: .chat, at: now, queue: &queue)
    }

    /// Bytes a device receives.
    mutating func receive(_ device: Int, bytes: Int, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard !provisioning else { return }
        fleet.transfer(device, bytes: bytes, .down, stack: .chat, at: now, queue: &queue)
        fleet.compute(device, millijoules: fleet.energy.settings.cpu.kilobyte * Double(bytes) / 1_024, stack: .chat, at: now, queue: &queue)
    }

    mutating func timerFired(_ device: Int, generation: UInt32, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard self.timerGeneration[device] == generation else { return }  // a later deadline replaced it
        timerAt[device] = nil
        feed(device, .timerFired, now: now, queue: &queue, fleet: &fleet)
    }

    /// A message reached its reader (or its sender's acknowledgement came back).
    mutating func delivered(_ message: ChatClientMessage, on device: Int, now: Instant, fleet: inout Fleet) {
        let arrival = sent.arrived(ChatStack.original(message.text), on: device, own: message.senderDeviceID == clients[device]?.deviceID)
        guard let at = arrival.sentAt else { return }
        if let retired = retiredAt[device], let invariant = invariants.removedReadNothing {
            fleet.invariants.check(invariant, at <= retired, "device \(device), removed at \(retired), decrypted \(message.text) sent at \(at)")
        }
        switch arrival {
        case .acknowledged(_, let group):
            fleet.recorder.add(metrics.messages[group ? 1 : 0])
            fleet.recorder.observe(metrics.ackLatency[group ? 1 : 0], UInt64(max(0, (now - at).nanoseconds)))
        case .read(_, let group):
            fleet.recorder.observe(metrics.deliveryLatency[group ? 1 : 0], UInt64(max(0, (now - at).nanoseconds)))
        case .unexpected, .again:
            break
        }
    }

    /// Something crossed a link: an input reaches its client (if that run still goes on),
    /// or a request, socket or frame reaches the server and waits for a worker.
    mutating func arrived(_ slot: UInt32, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard let transit = self.transits.take(slot) else { return }
        switch transit {
        case .input(let device, let run, let input):
            reach(device, run: run, input, now: now, queue: &queue, fleet: &fleet)
        case .overSocket(let device, let run, let socket, let input):
            guard links.arrive(device, socket: socket, closing: input.closesSocket) else {
                lostWithSockets += 1
                return
            }
            if input.closesSocket { awaitingOpening.remove(device) }
            reach(device, run: run, input, now: now, queue: &queue, fleet: &fleet)
        case .request, .connect, .frame:
            // Provisioning is the state the run starts from, not load on the server.
            if provisioning { return serve(transit, now: now, queue: &queue, fleet: &fleet) }
            switch serving.admit(transit, now: now, wait: metrics.serverWait, recorder: &fleet.recorder) {
            case .serving(let ticket, let epoch, let done): queue.schedule(.chat(.serviceDone(slot: ticket, epoch: epoch)), at: done)
            case .queued: break
            case .refused(let transit): turnAway(transit, overloaded: true, now: now, queue: &queue, fleet: &fleet)
            case .down(let transit): turnAway(transit, overloaded: false, now: now, queue: &queue, fleet: &fleet)
            }
        }
    }

    /// An input reaches its client, if that client's run still goes on.
    mutating func reach(_ device: Int, run: UInt32, _ input: ClientInput, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard run == currentSession(device), awakeSince[device] != nil else { return }
        switch input {
        case .response(let id, let response):
            receive(device, bytes: response.wireSize, now: now, queue: &queue, fleet: &fleet)
            endpoints.answered(device, id: id, status: response.status, now: now, recorder: &fleet.recorder)
        case .transportFailed(let id):
            endpoints.failed(device, id: id, recorder: &fleet.recorder)
        case .socketText(let text):
            if awaitingOpening.contains(device) { framesBeforeOpening += 1 }
            receive(device, bytes: text.utf8.count + Self.frameOverhead, now: now, queue: &queue, fleet: &fleet)
        case .socketOpened:
            awaitingOpening.remove(device)
            receive(device, bytes: Self.socketHandshakeBytes / 2, now: now, queue: &queue, fleet: &fleet)
        default:
            break
        }
        feed(device, input, now: now, queue: &queue, fleet: &fleet)
    }

    /// A worker finished: the core handles what it held, and the next waiting one starts.
    mutating func served(_ ticket: UInt32, epoch: UInt32, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard serving.pool.epoch == epoch else { return }
        if let transit = serving.finish(ticket, epoch: epoch, now: now) { serve(transit, now: now, queue: &queue, fleet: &fleet) }
        for next in serving.startWaiting(now: now, wait: metrics.serverWait, recorder: &fleet.recorder) {
            queue.schedule(.chat(.serviceDone(slot: next.ticket, epoch: next.epoch)), at: next.done)
        }
    }

    /// The server core handles a request, a socket open or a frame.
    mutating func serve(_ transit: Transit, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        switch transit {
        case .input, .overSocket:
            break
        case .request(let device, let run, let id, let request):
            let reply = server.handle(request, now: now)
            if reply.response.status == 201, request.method == "POST", request.path.hasSuffix("/keys/upload") { keysAt[device] = now }
            serverEnded(request, by: device, reply.response, now: now, fleet: &fleet)
            route(reply.outputs, now: now, queue: &queue, fleet: &fleet)
            if reply.response.status == 201, request.method == "POST" { stored(request, now: now, queue: &queue, fleet: &fleet) }
            if let latency = latency(device, fleet: &fleet) {
                schedule(.input(device: device, session: run, .response(id: id, reply.response)), after: latency, now: now, queue: &queue)
            } else {
                schedule(.input(device: device, session: run, .transportFailed(id: id)), after: .zero, now: now, queue: &queue)
            }
        case .connect(let device, let run, let socket, let ticket):
            switch server.connect(ticket: ticket, now: now) {
            case .accepted(let connection):
                // The client stopped, went offline or gave the socket up while the upgrade
                // was on its way (a close for a socket it gave up is lost with it).
                guard run == currentSession(device), awakeSince[device] != nil, links.isCurrent(device, socket: socket),
                      let latency = latency(device, fleet: &fleet) else {
                    server.disconnect(connection)
                    return schedule(.overSocket(device: device, session: run, socket: socket, .socketClosed(code: 1006)), after: .zero, now: now, queue: &queue)
                }
                connectionOf[device] = connection
                deviceOfConnection[connection] = device
                // The upgrade's answer is the socket's first arrival: a frame the server
                // sends at once (a message just stored) must not overtake it, or the client
                // would take it for one it held before its catch-up and stop paging short.
                let opened = links.socketArrival(device, latency: latency, now: now)
                schedule(.overSocket(device: device, session: run, socket: socket, .socketOpened), after: opened - now, now: now, queue: &queue)
                awaitingOpening.insert(device)
            case .refused(let code, _):
                schedule(.overSocket(device: device, session: run, socket: socket, .socketClosed(code: code)), after: .zero, now: now, queue: &queue)
            }
        case .frame(let device, _, let connection, let text):
            // Written to a connection the server has dropped since: lost.
            guard connectionOf[device] == connection else {
                lostWithSockets += 1
                return
            }
            route(server.receive(connection, text: text, now: now), now: now, queue: &queue, fleet: &fleet)
        }
    }

    /// The server cannot take it: overloaded (a 503 with Retry-After, a socket refused with
    /// 1013), or down (the connection is refused).
    mutating func turnAway(_ transit: Transit, overloaded: Bool, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        switch transit {
        case .input, .overSocket, .frame:
            break
        case .request(let device, let run, let id, _):
            let input: ClientInput = overloaded
                ? .response(id: id, .json(503, ["detail": "Service unavailable: the server is overloaded"], headers: [HTTPHeader("Retry-After", "5")]))
                : .transportFailed(id: id)
            schedule(.input(device: device, session: run, input), after: latency(device, fleet: &fleet) ?? .zero, now: now, queue: &queue)
        case .connect(let device, let run, let socket, _):
            schedule(.overSocket(device: device, session: run, socket: socket, .socketClosed(code: overloaded ? 1013 : 1006)),
                     after: latency(device, fleet: &fleet) ?? .zero, now: now, queue: &queue)
        }
    }

    /// The server's frames and closes, each over its device's link.
    mutating func route(_ outputs: [ChatOutput], now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        for output in outputs {
            switch output {
            case .send(let connection, let payload):
                guard let device = deviceOfConnection[connection], let latency = latency(device, fleet: &fleet) else { continue }
                if payload["type"] == "typing.start" { fleet.recorder.add(metrics.typing) }
                // A socket is one ordered stream: a frame never overtakes the one before it.
                let arrival = links.socketArrival(device, latency: latency, now: now)
                schedule(.overSocket(device: device, session: currentSession(device), socket: links.socket(device), .socketText(payload.canonicalText)),
                         after: arrival - now, now: now, queue: &queue)
            case .close(let connection, let code, _):
                guard let device = deviceOfConnection.removeValue(forKey: connection) else { continue }
                connectionOf[device] = nil
                closeArrives(device, code: code, now: now, queue: &queue, fleet: &fleet)
            }
        }
    }

    /// The server closed a device's socket (or crashed under it): the close reaches the
    /// client after the frames sent before it, as a TCP close does.
    mutating func closeArrives(_ device: Int, code: UInt16, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        let arrival = links.socketArrival(device, latency: latency(device, fleet: &fleet) ?? .zero, now: now)
        schedule(.overSocket(device: device, session: currentSession(device), socket: links.socket(device), .socketClosed(code: code)),
                 after: arrival - now, now: now, queue: &queue)
    }

    /// A device went offline: its socket drops (the client schedules its reconnect), and
    /// what was on its way over it is lost.
    mutating func networkChanged(_ device: Int, to state: NetworkState, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard state == .offline, let connection = connectionOf.removeValue(forKey: device) else { return }
        deviceOfConnection[connection] = nil
        server.disconnect(connection)
        links.socketGone(device)
        awaitingOpening.remove(device)
        feed(device, .socketClosed(code: 1006), now: now, queue: &queue, fleet: &fleet)
    }
}

extension ClientInput {
    /// The socket's close: what arrives over the socket after it belongs to no socket.
    var closesSocket: Bool {
        if case .socketClosed = self { return true }
        return false
    }
}
