import LabKernel

/// What every stack with a server of its own needs between its phones and that server,
/// in virtual time: each device's link (latency drawn from the device's own labelled
/// stream; none while offline), the order of a socket's frames, the server's worker
/// pool with what waits for and holds its workers, and `http.latency` by endpoint from
/// the client's request. Chat and the agent runtime share it; a new stack does too.
///
/// Fault model: an offline link fails requests at once and drops sockets; a server that
/// is down refuses everything and loses what waited for or held a worker; a full queue
/// refuses with 503 (and 1013 for a socket). A socket never delivers a frame before the
/// one sent before it, and what was on its way over a socket that has gone since is lost,
/// as on a TCP connection that dies: each device's socket is numbered, what the server
/// sends over it carries the number, and an arrival whose number is no longer the
/// device's is dropped (`isCurrent`). A client therefore never sees the opening of a socket
/// it has already lost, which would leave it sure of a socket no server holds.
struct DeviceLinks {
    /// The label of each device's latency stream (`chat-link`, `agent-link`).
    let label: String
    private var streams: [Int: SeededGenerator] = [:]
    /// When the last frame on each device's socket arrives.
    private var lastArrival: [Int: Instant] = [:]
    /// Each device's socket number: the next socket gets the next one.
    private var sockets: [Int: UInt32] = [:]

    init(label: String) { self.label = label }

    /// One-way latency of a device's link now (its access network, then the datacenter),
    /// or nil when it is offline.
    mutating func latency(_ device: Int, fleet: inout Fleet) -> TimeSpan? {
        let access: AccessKind
        switch fleet.devices[device].network {
        case .offline: return nil
        case .wifi: access = .wifi
        case .cellular: access = .cellular
        }
        var stream = streams.removeValue(forKey: device) ?? fleet.deviceSeed(device).child(label).generator()
        let seconds = fleet.links.latency(access, using: &stream) + fleet.links.latency(.datacenter, using: &stream)
        streams[device] = stream
        return .nanoseconds(Int64(max(0, seconds) * 1e9))
    }

    /// When a frame the server sends now over a device's socket arrives: after `latency`,
    /// and never before the frame sent before it.
    mutating func socketArrival(_ device: Int, latency: TimeSpan, now: Instant) -> Instant {
        let arrival = max(now + latency, lastArrival[device] ?? now)
        lastArrival[device] = arrival
        return arrival
    }

    /// The number of the device's socket: what the server sends over it carries it.
    func socket(_ device: Int) -> UInt32 { sockets[device] ?? 0 }

    /// Whether something sent over socket `number` still has a socket to arrive on.
    func isCurrent(_ device: Int, socket number: UInt32) -> Bool { socket(device) == number }

    /// Something sent over socket `number` arrives: false if that socket has gone (it is
    /// lost); a close that arrives ends its socket.
    mutating func arrive(_ device: Int, socket number: UInt32, closing: Bool) -> Bool {
        guard isCurrent(device, socket: number) else { return false }
        if closing { socketGone(device) }
        return true
    }

    /// The device's socket is gone, as far as its client knows (it closed it, its network
    /// dropped, the server's close arrived, the app stopped): what is still on its way over
    /// it is lost, and the next socket starts a fresh order.
    mutating func socketGone(_ device: Int) {
        lastArrival[device] = nil
        sockets[device] = socket(device) &+ 1
    }
}

/// A server's worker pool and the work (`Cargo`) waiting for or held by its workers.
struct ServerQueue<Cargo> {
    var pool: WorkerPool
    private var held: [UInt32: Cargo] = [:]
    private var nextTicket: UInt32 = 0

    init(_ capacity: ServerCapacity, seed: StreamSeed) { pool = WorkerPool(capacity, seed: seed) }

    enum Admission {
        /// A worker took it: schedule its completion (`ticket`, `epoch`) at `done`.
        case serving(ticket: UInt32, epoch: UInt32, done: Instant)
        case queued
        /// The queue is full: answer 503.
        case refused(Cargo)
        /// The server is down: nothing answers.
        case down(Cargo)
    }

    /// Offers work to the pool; a worker taking it at once waited zero (`wait`).
    mutating func admit(_ cargo: Cargo, now: Instant, wait: MetricHandle, recorder: inout Recorder) -> Admission {
        let ticket = nextTicket
        nextTicket &+= 1
        switch pool.admit(ticket, now: now) {
        case .serving(let service):
            held[ticket] = cargo
            recorder.observe(wait, 0)
            return .serving(ticket: ticket, epoch: pool.epoch, done: now + service)
        case .queued:
            held[ticket] = cargo
            return .queued
        case .refused: return .refused(cargo)
        case .down: return .down(cargo)
        }
    }

    /// A worker finished `ticket`: its work (nil when a crash voided it).
    mutating func finish(_ ticket: UInt32, epoch: UInt32, now: Instant) -> Cargo? {
        guard pool.complete(epoch: epoch, now: now) else { return nil }
        return held.removeValue(forKey: ticket)
    }

    /// Hands waiting work to free workers: each start's completion to schedule.
    mutating func startWaiting(now: Instant, wait: MetricHandle, recorder: inout Recorder) -> [(ticket: UInt32, epoch: UInt32, done: Instant)] {
        let waiting = held
        var started: [(UInt32, UInt32, Instant)] = []
        while let next = pool.startNext(now: now, isWanted: { waiting[$0] != nil }) {
            recorder.observe(wait, UInt64(max(0, next.waited.nanoseconds)))
            started.append((next.token, pool.epoch, now + next.service))
        }
        return started
    }

    /// The server crashes (or comes back): a crash loses what waited and what was served.
    mutating func setDown(_ down: Bool, now: Instant) {
        pool.setDown(down, now: now)
        if down { held.removeAll() }
    }
}

/// `http.requests`, `http.latency` and `http.failures` of one stack by endpoint (registered
/// as routes first appear), timed from the client's request to its answer, and the
/// requests in flight.
struct EndpointLatency {
    let stack: String
    private var index: [String: Int] = [:]
    private var handles: [EndpointMetrics] = []
    private var started: [Int: [Int: (at: Instant, endpoint: Int)]] = [:]

    init(stack: String) { self.stack = stack }

    /// A client made request `id` on `route`.
    mutating func began(_ device: Int, id: Int, route: String, now: Instant, recorder: inout Recorder) {
        let endpoint = endpoint(route, recorder: &recorder)
        recorder.add(handles[endpoint].requests)
        started[device, default: [:]][id] = (now, endpoint)
    }

    /// Its answer reached the client (a 5xx counts as a failure too).
    mutating func answered(_ device: Int, id: Int, status: Int, now: Instant, recorder: inout Recorder) {
        guard let request = started[device]?.removeValue(forKey: id) else { return }
        recorder.observe(handles[request.endpoint].latency, UInt64(max(0, (now - request.at).nanoseconds)))
        if status >= 500 { recorder.add(handles[request.endpoint].failures) }
    }

    /// It never got an answer.
    mutating func failed(_ device: Int, id: Int, recorder: inout Recorder) {
        guard let request = started[device]?.removeValue(forKey: id) else { return }
        recorder.add(handles[request.endpoint].failures)
    }

    /// The device's client stopped: its requests in flight are no one's any more.
    mutating func forget(_ device: Int) { started[device] = nil }

    mutating func endpoint(_ route: String, recorder: inout Recorder) -> Int {
        if let existing = index[route] { return existing }
        handles.append(EndpointMetrics(stack: stack, endpoint: route, recorder: &recorder))
        index[route] = handles.count - 1
        return handles.count - 1
    }
}

/// What is on its way across a link: the kernel's event carries a slot, the stack keeps
/// the payload until the event fires (events stay small and `Sendable`).
struct InFlight<Value> {
    private var values: [UInt32: Value] = [:]
    private var next: UInt32 = 0

    /// Keeps `value` and returns the slot its event carries.
    mutating func park(_ value: Value) -> UInt32 {
        let slot = next
        next &+= 1
        values[slot] = value
        return slot
    }

    /// The payload of an arriving event, once.
    mutating func take(_ slot: UInt32) -> Value? { values.removeValue(forKey: slot) }
}
