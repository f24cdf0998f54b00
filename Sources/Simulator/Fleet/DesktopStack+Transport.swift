import DesktopBridgeClient
import DesktopBridgeServer
import DesktopBridgeWire
import LabKernel

/// How phones and their desktops reach one another: over the home Wi-Fi only.
extension DesktopStack {
    mutating func schedule(_ transit: Transit, at time: Instant, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        queue.schedule(.desktop(.transit(slot: transits.park(transit))), at: max(now, time))
    }

    /// One-way LAN latency for a phone now, or nil when it is not on Wi-Fi (not at home).
    mutating func lan(_ device: Int, fleet: Fleet) -> TimeSpan? {
        guard fleet.devices[device].network == .wifi else { return nil }
        let seconds = fleet.links.latency(.wifi, using: &phones[device]!.link)
        return .nanoseconds(Int64(max(0, seconds) * 1e9))
    }

    /// Feeds a phone's client and carries out what it asks.
    mutating func feed(_ device: Int, _ input: DesktopClientInput, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard var client = clients.removeValue(forKey: device) else { return }
        let effects = client.handle(input, now: now)
        let deadline = client.nextDeadline
        let reconnects = client.stats.reconnects
        clients[device] = client
        if reconnects > phones[device]!.reconnects {
            fleet.recorder.add(metrics.reconnects, Double(reconnects - phones[device]!.reconnects))
            phones[device]!.reconnects = reconnects
        }
        if deadline != phones[device]!.timerAt {
            phones[device]!.timerAt = deadline
            phones[device]!.timerGeneration &+= 1
            if let deadline { queue.schedule(.desktop(.phoneTimer(device: UInt32(device), generation: phones[device]!.timerGeneration)), at: max(now, deadline)) }
        }
        let desk = phones[device]!.desk
        for effect in effects {
            switch effect {
            case .openSocket:
                phones[device]!.socket &+= 1
                phones[device]!.dialedAt = now
                let socket = phones[device]!.socket
                if let latency = lan(device, fleet: fleet) {
                    schedule(.dial(device: device, socket: socket), at: now + latency, now: now, queue: &queue)
                } else {
                    // Not on the home Wi-Fi: the desktop's address is not reachable.
                    schedule(.dialed(device: device, socket: socket, open: false), at: now + .milliseconds(50), now: now, queue: &queue)
                }
            case .send(let text):
                guard phones[device]!.open, let latency = lan(device, fleet: fleet) else { continue }
                transfer(device, bytes: text.utf8.count + 8, .up, now: now, queue: &queue, fleet: &fleet)
                let arrival = max(now + latency, phones[device]!.toDesk)
                phones[device]!.toDesk = arrival
                schedule(.toDesk(device: device, socket: phones[device]!.socket, text), at: arrival, now: now, queue: &queue)
            case .closeSocket:
                closeSocket(device)
            case .timelineChanged(let session): timelineChanged(device, session, now: now, fleet: &fleet)
            case .rebuilt(let session, _):
                fleet.recorder.add(metrics.rebuilds)
                if let at = phones[device]!.dialedAt { fleet.recorder.observe(metrics.rebuildTime, UInt64(max(0, (now - at).nanoseconds))) }
                checkWhole(device, session, fleet: &fleet)
            case .sessionCreated(let session):
                if desks[desk].session == nil { desks[desk].session = session }
                if let text = phones[device]!.pending {
                    phones[device]!.pending = nil
                    send(device, text, now: now, queue: &queue, fleet: &fleet)
                }
            case .connected:
                // A prompt made while the socket was opening goes out now.
                if let text = phones[device]!.pending, desks[desk].session != nil {
                    phones[device]!.pending = nil
                    send(device, text, now: now, queue: &queue, fleet: &fleet)
                }
            case .turnEnded, .promptAccepted, .answered:
                break  // a turn's end is read from the desktop (both dialects alike)
            case .failed(let error):
                // A prompt the desktop refused (busy with another phone's turn), or one lost with its socket.
                if case .rpc(.prompt, _, _) = error { fleet.recorder.add(metrics.prompts["failed"]!) }
                if case .disconnected(.prompt) = error, phones[device]!.promptAt != nil, desks[desk].turn?.device != device {
                    fleet.recorder.add(metrics.prompts["failed"]!)
                }
            case .gaveUp:
                fleet.recorder.add(metrics.gaveUp)
            }
        }
    }

    mutating func transfer(_ device: Int, bytes: Int, _ direction: EnergyLedger.Direction, now: Instant, queue: inout EventQueue<FleetWorld.Event>,
                           fleet: inout Fleet) {
        fleet.transfer(device, bytes: bytes, direction, stack: .desktopBridge, at: now, queue: &queue)
        fleet.compute(device, millijoules: fleet.energy.settings.cpu.kilobyte * Double(bytes) / 1_024, stack: .desktopBridge, at: now, queue: &queue)
    }

    /// The phone's socket is gone: the desktop lets its connection go.
    mutating func closeSocket(_ device: Int) {
        phones[device]!.open = false
        phones[device]!.socket &+= 1
        phones[device]!.toPhone = .zero
        phones[device]!.toDesk = .zero
        let desk = phones[device]!.desk
        if let connection = desks[desk].connection.removeValue(forKey: device) { desks[desk].bridge.disconnect(connection) }
    }

    /// The socket drops under the phone (it left the Wi-Fi, the desktop slept).
    mutating func drop(_ device: Int, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard phones[device]!.open else { return }
        closeSocket(device)
        feed(device, .socketClosed, now: now, queue: &queue, fleet: &fleet)
    }

    mutating func arrived(_ slot: UInt32, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard let transit = transits.take(slot) else { return }
        switch transit {
        case .dial(let device, let socket):
            guard phones[device]!.socket == socket else { return }
            let desk = phones[device]!.desk
            guard desks[desk].awake, let latency = lan(device, fleet: fleet) else {
                return schedule(.dialed(device: device, socket: socket, open: false), at: now + .milliseconds(200), now: now, queue: &queue)
            }
            desks[desk].connection[device] = desks[desk].bridge.connect()
            schedule(.dialed(device: device, socket: socket, open: true), at: now + latency, now: now, queue: &queue)
        case .dialed(let device, let socket, let open):
            guard phones[device]!.socket == socket else { return }
            if open {
                phones[device]!.open = true
                feed(device, .socketOpened, now: now, queue: &queue, fleet: &fleet)
            } else {
                feed(device, .socketClosed, now: now, queue: &queue, fleet: &fleet)
            }
        case .toDesk(let device, let socket, let text):
            let desk = phones[device]!.desk
            guard phones[device]!.socket == socket, let connection = desks[desk].connection[device] else { return }
            let session = desks[desk].session ?? ""
            let running = desks[desk].bridge.isTurnRunning(session)
            let reply = desks[desk].bridge.receive(connection, text: text, now: now)
            if !running && desks[desk].bridge.isTurnRunning(session), let at = phones[device]!.promptAt {
                // This phone's prompt started a turn.
                desks[desk].turns &+= 1
                desks[desk].turn = (device, at, false)
                if phones[device]!.stream.chance(settings.cancelShare) {
                    let delay = TimeSpan.milliseconds(1_000 + Int64(phones[device]!.stream.next(below: 2_000)))
                    queue.schedule(.desktop(.cancel(desk: UInt32(desk), turn: desks[desk].turns)), at: now + delay)
                }
            }
            carryOut(desk, reply, now: now, queue: &queue, fleet: &fleet)
        case .toPhone(let device, let socket, let text):
            guard phones[device]!.socket == socket, phones[device]!.open else { return }
            transfer(device, bytes: text.utf8.count + 8, .down, now: now, queue: &queue, fleet: &fleet)
            feed(device, .socketText(text), now: now, queue: &queue, fleet: &fleet)
        }
    }

    /// What a desktop's core asked for: frames to its phones, its next timer. (Scenarios
    /// give desktops the scripted agent and no file work, so operations do not come up.)
    mutating func carryOut(_ desk: Int, _ reply: DesktopReply, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        for case .send(let connection, let text) in reply.outputs {
            guard let device = desks[desk].connection.first(where: { $0.value == connection })?.key, phones[device]!.open,
                  let latency = lan(device, fleet: fleet) else { continue }
            let arrival = max(now + latency, phones[device]!.toPhone)
            phones[device]!.toPhone = arrival
            schedule(.toPhone(device: device, socket: phones[device]!.socket, text), at: arrival, now: now, queue: &queue)
        }
        if let turn = desks[desk].turn, let session = desks[desk].session, !desks[desk].bridge.isTurnRunning(session) {
            let cancelled = desks[desk].bridge.state.history[session]?.last.map { entry in
                if case .agentMessageChunk(let text) = entry.update { return !text.hasSuffix("as it comes.") }
                return true
            } ?? true
            fleet.recorder.add(metrics.prompts[cancelled ? "cancelled" : "ok"]!)
            if !cancelled { fleet.recorder.observe(metrics.turnTime, UInt64(max(0, (now - turn.at).nanoseconds))) }
            desks[desk].turn = nil
        }
        let deadline = desks[desk].bridge.nextDeadline
        guard deadline != desks[desk].timerAt else { return }
        desks[desk].timerAt = deadline
        desks[desk].timerGeneration &+= 1
        if let deadline { queue.schedule(.desktop(.deskTimer(desk: UInt32(desk), generation: desks[desk].timerGeneration)), at: max(now, deadline)) }
    }

    /// The phone left the Wi-Fi: its socket drops; back on it with the app on screen, the
    /// app dials again (as its reachability observer would).
    mutating func networkChanged(_ device: Int, to state: NetworkState, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard phones[device] != nil else { return }
        if state != .wifi {
            drop(device, now: now, queue: &queue, fleet: &fleet)
        } else if phones[device]!.running {
            feed(device, .connect, now: now, queue: &queue, fleet: &fleet)
        }
    }
}
