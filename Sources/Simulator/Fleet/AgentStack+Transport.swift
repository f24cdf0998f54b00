import AgentRuntimeClient
import AgentRuntimeServer
import AgentRuntimeWire
import LabKernel

/// How the agent stack's clients and its server reach each other.
extension AgentStack {
    mutating func schedule(_ transit: Transit, after delay: TimeSpan, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        queue.schedule(.agent(.transit(slot: transits.park(transit))), at: now + delay)
    }

    func currentSession(_ device: Int) -> UInt32 { session[device] ?? 0 }

    /// A WebSocket upgrade, and what each frame adds to its text.
    static let socketHandshakeBytes = 420
    static let frameOverhead = 8

    /// Feeds a running client one input and carries out what it asks.
    mutating func feed(_ device: Int, _ input: AgentClientInput, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard awakeSince[device] != nil, var client = clients.removeValue(forKey: device) else { return }
        let reconnectsBefore = client.stats.reconnects
        let effects = client.handle(input, now: now)
        let deadline = client.nextDeadline
        if client.stats.reconnects > reconnectsBefore { fleet.recorder.add(metrics.reconnects, Double(client.stats.reconnects - reconnectsBefore)) }
        clients[device] = client
        if deadline != timerAt[device] {
            timerAt[device] = deadline
            let generation = (timerGeneration[device] ?? 0) &+ 1
            timerGeneration[device] = generation
            if let deadline { queue.schedule(.agent(.timer(device: UInt32(device), generation: generation)), at: max(now, deadline)) }
        }
        let run = currentSession(device)
        for effect in effects {
            switch effect {
            case .request(let id, let request):
                endpoints.began(device, id: id, route: AgentRoute.template(request), now: now, recorder: &fleet.recorder)
                transfer(device, bytes: request.wireSize, .up, now: now, queue: &queue, fleet: &fleet)
                if let latency = links.latency(device, fleet: &fleet) {
                    schedule(.request(device: device, session: run, id: id, request), after: latency, now: now, queue: &queue)
                } else {
                    schedule(.input(device: device, session: run, .transportFailed(id: id)), after: .zero, now: now, queue: &queue)
                }
            case .openSocket(let target):
                users[device]!.connectingAt = now
                transfer(device, bytes: Self.socketHandshakeBytes, .up, now: now, queue: &queue, fleet: &fleet)
                if let latency = links.latency(device, fleet: &fleet) {
                    schedule(.connect(device: device, session: run, socket: links.socket(device), target: target), after: latency, now: now, queue: &queue)
                } else {
                    schedule(.input(device: device, session: run, .socketClosed(code: 1006)), after: .zero, now: now, queue: &queue)
                }
            case .socketSend(let text):
                transfer(device, bytes: text.utf8.count + Self.frameOverhead, .up, now: now, queue: &queue, fleet: &fleet)
                if let latency = links.latency(device, fleet: &fleet), let connection = connectionOf[device] {
                    schedule(.frame(device: device, session: run, connection: connection, text), after: latency, now: now, queue: &queue)
                }
            case .closeSocket:
                dropConnection(device)
                links.socketGone(device)
            case .chatReady, .applied, .toolCall, .toolCallResolved, .inputRequested, .runCompleted, .resumed, .uploaded, .surfaced, .authRequired:
                observe(effect, on: device, now: now, queue: &queue, fleet: &fleet)
            }
        }
    }

    /// Radio and CPU for `bytes` (the battery pays).
    mutating func transfer(_ device: Int, bytes: Int, _ direction: EnergyLedger.Direction, now: Instant, queue: inout EventQueue<FleetWorld.Event>,
                           fleet: inout Fleet) {
        fleet.transfer(device, bytes: bytes, direction, stack: .agent, at: now, queue: &queue)
        fleet.compute(device, millijoules: fleet.energy.settings.cpu.kilobyte * Double(bytes) / 1_024, stack: .agent, at: now, queue: &queue)
    }

    /// The server forgets the device's connection (the client learns of it by its own
    /// close, its network, or the close that reaches it: `closeArrives`).
    mutating func dropConnection(_ device: Int) {
        guard let connection = connectionOf.removeValue(forKey: device) else { return }
        deviceOfConnection[connection] = nil
        server.disconnect(connection)
    }

    /// The server closed a device's socket (or crashed under it): the close reaches the
    /// client after the frames sent before it, as a TCP close does.
    mutating func closeArrives(_ device: Int, code: UInt16, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        let arrival = links.socketArrival(device, latency: links.latency(device, fleet: &fleet) ?? .zero, now: now)
        schedule(.overSocket(device: device, session: currentSession(device), socket: links.socket(device), .socketClosed(code: code)),
                 after: arrival - now, now: now, queue: &queue)
    }

    mutating func timerFired(_ device: Int, generation: UInt32, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard timerGeneration[device] == generation else { return }
        timerAt[device] = nil
        feed(device, .timerFired, now: now, queue: &queue, fleet: &fleet)
    }

    /// Something crossed a link: an input reaches its client (if that run still goes on),
    /// or a request, socket or frame reaches the server and waits for a worker.
    mutating func arrived(_ slot: UInt32, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard let transit = transits.take(slot) else { return }
        switch transit {
        case .input(let device, let run, let input):
            reach(device, run: run, input, now: now, queue: &queue, fleet: &fleet)
        case .overSocket(let device, let run, let socket, let input):
            guard links.arrive(device, socket: socket, closing: input.closesSocket) else { return }  // lost with its socket
            reach(device, run: run, input, now: now, queue: &queue, fleet: &fleet)
        case .request, .connect, .frame:
            switch serving.admit(transit, now: now, wait: metrics.serverWait, recorder: &fleet.recorder) {
            case .serving(let ticket, let epoch, let done): queue.schedule(.agent(.serviceDone(slot: ticket, epoch: epoch)), at: done)
            case .queued: break
            case .refused(let transit): turnAway(transit, overloaded: true, now: now, queue: &queue, fleet: &fleet)
            case .down(let transit): turnAway(transit, overloaded: false, now: now, queue: &queue, fleet: &fleet)
            }
        }
    }

    /// An input reaches its client, if that client's run still goes on.
    mutating func reach(_ device: Int, run: UInt32, _ input: AgentClientInput, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard run == currentSession(device), awakeSince[device] != nil else { return }
        switch input {
        case .response(let id, let response):
            transfer(device, bytes: response.wireSize, .down, now: now, queue: &queue, fleet: &fleet)
            endpoints.answered(device, id: id, status: response.status, now: now, recorder: &fleet.recorder)
        case .transportFailed(let id):
            endpoints.failed(device, id: id, recorder: &fleet.recorder)
        case .socketText(let text):
            lastFrameAt[device] = now
            transfer(device, bytes: text.utf8.count + Self.frameOverhead, .down, now: now, queue: &queue, fleet: &fleet)
        case .socketOpened:
            transfer(device, bytes: Self.socketHandshakeBytes / 2, .down, now: now, queue: &queue, fleet: &fleet)
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
            queue.schedule(.agent(.serviceDone(slot: next.ticket, epoch: next.epoch)), at: next.done)
        }
    }

    /// The server core handles a request, a socket open or a frame.
    mutating func serve(_ transit: Transit, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        switch transit {
        case .input, .overSocket:
            break
        case .request(let device, let run, let id, let request):
            let reply = server.handle(request, now: now)
            carryOut(reply, now: now, queue: &queue, fleet: &fleet)
            if let latency = links.latency(device, fleet: &fleet) {
                schedule(.input(device: device, session: run, .response(id: id, reply.response)), after: latency, now: now, queue: &queue)
            } else {
                schedule(.input(device: device, session: run, .transportFailed(id: id)), after: .zero, now: now, queue: &queue)
            }
        case .connect(let device, let run, let socket, let target):
            let request = HTTPRequestMessage(method: "GET", target: target)
            switch server.connect(path: request.path, query: request.query, now: now) {
            case .accepted(let connection, let reply):
                // The client stopped, went offline or gave the socket up while the upgrade
                // was on its way (a close for a socket it gave up is lost with it).
                guard run == currentSession(device), awakeSince[device] != nil, links.isCurrent(device, socket: socket),
                      let latency = links.latency(device, fleet: &fleet) else {
                    server.disconnect(connection)
                    return schedule(.overSocket(device: device, session: run, socket: socket, .socketClosed(code: 1006)), after: .zero, now: now, queue: &queue)
                }
                dropConnection(device)
                connectionOf[device] = connection
                deviceOfConnection[connection] = device
                // The opening is the socket's first arrival: no frame can overtake it.
                let opened = links.socketArrival(device, latency: latency, now: now)
                schedule(.overSocket(device: device, session: run, socket: socket, .socketOpened), after: opened - now, now: now, queue: &queue)
                carryOut(reply, now: now, queue: &queue, fleet: &fleet)
            case .refused(let code, _):
                schedule(.overSocket(device: device, session: run, socket: socket, .socketClosed(code: code)), after: .zero, now: now, queue: &queue)
            }
        case .frame(let device, _, let connection, let text):
            guard connectionOf[device] == connection else { return }  // written to a connection the server has dropped since
            carryOut(server.receive(connection, text: text, now: now), now: now, queue: &queue, fleet: &fleet)
        }
    }

    /// What the core asked for: frames over each device's socket (in order), wake-ups.
    mutating func carryOut(_ reply: AgentReply, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        for output in reply.outputs {
            switch output {
            case .send(let connection, let text):
                guard let device = deviceOfConnection[connection], let latency = links.latency(device, fleet: &fleet) else { continue }
                let arrival = links.socketArrival(device, latency: latency, now: now)
                schedule(.overSocket(device: device, session: currentSession(device), socket: links.socket(device), .socketText(text)),
                         after: arrival - now, now: now, queue: &queue)
            case .close(let connection, let code, _):
                guard let device = deviceOfConnection[connection] else { continue }
                dropConnection(device)
                closeArrives(device, code: code, now: now, queue: &queue, fleet: &fleet)
            }
        }
        for wakeup in reply.wakeups {
            let slot = nextWake
            nextWake &+= 1
            wakeChats[slot] = wakeup.chatID
            queue.schedule(.agent(.runDue(slot: slot)), at: max(now, wakeup.at))
        }
        // Scenarios run scripted workflows only; a program cannot run here.
        for command in reply.commands {
            carryOut(server.backendFinished(run: command.run, status: -1, reason: "no programs in a simulation", now: now), now: now,
                     queue: &queue, fleet: &fleet)
        }
    }

    /// A chat's scripted step is due (a server that is down plays nothing; it resumes its
    /// runs when it comes back).
    mutating func runDue(_ slot: UInt32, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard let chat = wakeChats.removeValue(forKey: slot), !serving.pool.isDown else { return }
        carryOut(server.runDue(chat, now: now), now: now, queue: &queue, fleet: &fleet)
    }

    /// The server cannot take it: overloaded (503, a socket refused with 1013) or down.
    mutating func turnAway(_ transit: Transit, overloaded: Bool, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        switch transit {
        case .input, .overSocket, .frame:
            break
        case .request(let device, let run, let id, _):
            let input: AgentClientInput = overloaded
                ? .response(id: id, .json(503, ["detail": "Service unavailable: the runtime is overloaded"], headers: [HTTPHeader("Retry-After", "5")]))
                : .transportFailed(id: id)
            schedule(.input(device: device, session: run, input), after: links.latency(device, fleet: &fleet) ?? .zero, now: now, queue: &queue)
        case .connect(let device, let run, let socket, _):
            schedule(.overSocket(device: device, session: run, socket: socket, .socketClosed(code: overloaded ? 1013 : 1006)),
                     after: links.latency(device, fleet: &fleet) ?? .zero, now: now, queue: &queue)
        }
    }

    /// A device went offline: its socket drops, and what was on its way over it is lost.
    mutating func networkChanged(_ device: Int, to state: NetworkState, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard state == .offline, connectionOf[device] != nil else { return }
        dropConnection(device)
        links.socketGone(device)
        feed(device, .socketClosed(code: 1006), now: now, queue: &queue, fleet: &fleet)
    }

    /// The server crashes (or comes back): every socket drops and what waited for or held a
    /// worker is lost; its state survives, and its runs go on when it is back (`recover`).
    mutating func setServerDown(_ down: Bool, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        serving.setDown(down, now: now)
        guard down else { return carryOut(server.recover(now: now), now: now, queue: &queue, fleet: &fleet) }
        for (device, _) in connectionOf.sorted(by: { $0.key < $1.key }) {
            dropConnection(device)
            closeArrives(device, code: 1006, now: now, queue: &queue, fleet: &fleet)
        }
    }
}

extension AgentClientInput {
    /// The socket's close: what arrives over the socket after it belongs to no socket.
    var closesSocket: Bool {
        if case .socketClosed = self { return true }
        return false
    }
}
