public import Foundation
import Synchronization

/// Runs each reference server of `fleetlab serve` in a worker process of its own and
/// restarts one that dies, so a request that traps in one server's handler (a Swift
/// trap cannot be caught inside a process) takes down neither the others nor
/// `fleetlab serve` itself.
///
/// Fault model. A worker that exits by a signal (a trap is SIGILL or SIGTRAP) or with a
/// non-zero status is restarted on the port it had bound, after a backoff of 0.2 s
/// doubling to 5 s (reset once a worker has stayed up a minute); requests in flight on
/// that server fail with a closed connection, nothing answered is lost (every server
/// commits a request's rows before it answers). Workers run in their own process group,
/// so a terminal's Ctrl-C reaches only the supervisor, which stops them with SIGTERM
/// (SIGKILL after 10 s) in `stop()`; a worker whose supervisor dies exits by itself
/// (it watches its parent).
///
/// `playOutages` takes workers down on a `FaultTimetable` (`fleetlab serve --faults`): a
/// worker is killed outright (SIGKILL, as a crash would end it) when its window opens, is
/// not restarted while the window lasts, so nothing listens on its port, and is started
/// again, over the same data, when it closes. Such a stop counts as no restart.
///
/// A worker announces itself with one line on its standard output, `Self.readyPrefix`
/// and a JSON `Ready`; every other line it writes is passed through to ours.
public final class ServerSupervisor: Sendable {
    public struct Ready: Codable, Sendable, Equatable {
        public var name: String
        public var port: Int
        public var url: String
        public var summary: String
        public var details: [String]

        public init(name: String, port: Int, url: String, summary: String, details: [String]) {
            self.name = name
            self.port = port
            self.url = url
            self.summary = summary
            self.details = details
        }
    }

    /// What `/version` shows of a worker.
    public struct WorkerStatus: Codable, Sendable, Equatable {
        public var name: String
        public var port: Int
        public var pid: Int32
        public var restarts: Int
        /// A fault's window holds it down (`playOutages`).
        public var down: Bool
    }

    public static let readyPrefix = "FLEETLAB-WORKER-READY "

    public enum Failure: Error, CustomStringConvertible {
        case spawn(String, Int32)
        case exitedEarly(String, String)
        case timeout(String)

        public var description: String {
            switch self {
            case .spawn(let name, let code): return "could not start the \(name) server (errno \(code))"
            case .exitedEarly(let name, let why): return "the \(name) server stopped while starting (\(why))"
            case .timeout(let name): return "the \(name) server did not come up within 60 s"
            }
        }
    }

    struct Worker {
        var name: String
        /// The worker's arguments for a port (the requested one first, then the bound one).
        var arguments: @Sendable (Int) -> [String]
        var port: Int
        var pid: Int32 = 0
        var restarts = 0
        var startedAt = Date()
        var ready: Ready?
        var backoff: TimeInterval = 0.2
        /// A fault's window holds it down.
        var heldDown = false
        /// Killed for a fault and not yet reaped: its watcher decides about the restart.
        var killedForFault = false
    }

    struct State {
        var workers: [Worker]
        var stopping = false
    }

    let executable: String
    let state: Mutex<State>
    let log: @Sendable (String) -> Void
    let readySignal = DispatchSemaphore(value: 0)

    /// `workers`: each server's name, the port asked for, and its command line for a port.
    public init(executable: String, workers: [(name: String, port: Int, arguments: @Sendable (Int) -> [String])],
                log: @escaping @Sendable (String) -> Void) {
        self.executable = executable
        self.state = Mutex(State(workers: workers.map { Worker(name: $0.name, arguments: $0.arguments, port: $0.port) }))
        self.log = log
    }

    /// The path of the running executable, for spawning workers of the same build.
    public static var currentExecutable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// Starts every worker and waits until each has announced itself.
    public func start() throws -> [Ready] {
        let count = state.withLock { $0.workers.count }
        for index in 0..<count { try spawn(index) }
        let deadline = Date().addingTimeInterval(60)
        while true {
            let (ready, failed) = state.withLock { s in (s.workers.compactMap(\.ready), s.workers.first { $0.pid == -1 }) }
            if let failed { stop(); throw Failure.exitedEarly(failed.name, "see its message above") }
            if ready.count == count { return ready }
            if readySignal.wait(timeout: .now() + max(0, deadline.timeIntervalSinceNow)) == .timedOut {
                let missing = state.withLock { $0.workers.first { $0.ready == nil }?.name } ?? "?"
                stop()
                throw Failure.timeout(missing)
            }
        }
    }

    public var statuses: [WorkerStatus] {
        state.withLock { s in s.workers.map { WorkerStatus(name: $0.name, port: $0.ready?.port ?? $0.port, pid: $0.pid, restarts: $0.restarts, down: $0.heldDown) } }
    }

    /// Stops every worker: SIGTERM, then SIGKILL for any still there after 10 s.
    public func stop() {
        let pids = state.withLock { s -> [Int32] in
            s.stopping = true
            return s.workers.map(\.pid).filter { $0 > 0 }
        }
        for pid in pids { kill(pid, SIGTERM) }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, state.withLock({ $0.workers.contains { $0.pid > 0 } }) { usleep(20_000) }
        for pid in state.withLock({ $0.workers.map(\.pid).filter { $0 > 0 } }) { kill(pid, SIGKILL) }
    }

    func spawn(_ index: Int) throws {
        let (name, arguments) = state.withLock { s in (s.workers[index].name, s.workers[index].arguments(s.workers[index].port)) }
        var output: [Int32] = [0, 0]
        guard pipe(&output) == 0 else { throw Failure.spawn(name, errno) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_addclose(&actions, output[0])
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Its own process group: a terminal's Ctrl-C is the supervisor's to handle.
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        // A crash report names the crashed thread's frames only (the user's own
        // SWIFT_BACKTRACE wins): a worker's other threads are NIO's idle event loops.
        var environment = ProcessInfo.processInfo.environment
        if environment["SWIFT_BACKTRACE"] == nil {
            environment["SWIFT_BACKTRACE"] = "enable=yes,interactive=no,threads=crashed,registers=none,images=none"
        }
        let envp: [UnsafeMutablePointer<CChar>?] = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        close(output[1])
        guard status == 0 else {
            close(output[0])
            throw Failure.spawn(name, status)
        }
        state.withLock { s in
            s.workers[index].pid = pid
            s.workers[index].startedAt = Date()
        }
        let (readEnd, child) = (output[0], pid)
        let reader = Thread { [self] in readLines(from: readEnd, worker: index) }
        reader.name = "fleetlab-\(name)-output"
        reader.start()
        let watcher = Thread { [self] in watch(child, worker: index) }
        watcher.name = "fleetlab-\(name)-watch"
        watcher.start()
    }

    /// Passes a worker's output through, taking its ready line out.
    func readLines(from fd: Int32, worker index: Int) {
        defer { close(fd) }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = read(fd, &chunk, chunk.count)
            guard count > 0 else { return }
            buffer += chunk[..<count]
            while let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                if line.hasPrefix(Self.readyPrefix),
                   let ready = try? JSONDecoder().decode(Ready.self, from: Data(line.dropFirst(Self.readyPrefix.count).utf8)) {
                    state.withLock { s in
                        s.workers[index].ready = ready
                        s.workers[index].port = ready.port
                    }
                    readySignal.signal()
                } else {
                    FileHandle.standardOutput.write(Data((line + "\n").utf8))
                }
            }
        }
    }

    /// Waits for a worker to end; restarts it unless the supervisor is stopping.
    func watch(_ pid: Int32, worker index: Int) {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let signal = status & 0x7F
        let code = (status >> 8) & 0xFF
        let why = signal != 0 ? "signal \(signal)\(signal == SIGILL || signal == SIGTRAP ? ", a trap" : "")" : "exit status \(code)"
        let decision: (restart: Bool, name: String, port: Int, delay: TimeInterval, wasReady: Bool) = state.withLock { s in
            var worker = s.workers[index]
            worker.pid = 0
            if worker.killedForFault {
                // A fault's stop, not a crash: back at once if the window already closed.
                worker.killedForFault = false
                s.workers[index] = worker
                return (!s.stopping && !worker.heldDown, worker.name, worker.ready?.port ?? worker.port, 0, true)
            }
            let wasReady = worker.ready != nil
            let restart = !s.stopping && wasReady
            if !wasReady && !s.stopping { worker.pid = -1 }  // failed while starting: `start` reports it
            if Date().timeIntervalSince(worker.startedAt) > 60 { worker.backoff = 0.2 }
            let delay = worker.backoff
            if restart {
                worker.restarts += 1
                worker.backoff = min(5, worker.backoff * 2)
            }
            s.workers[index] = worker
            return (restart, worker.name, worker.ready?.port ?? worker.port, delay, wasReady)
        }
        if !decision.wasReady { readySignal.signal() }
        guard decision.restart else { return }
        if decision.delay == 0 {
            log("fleetlab serve: fault over: starting the \(decision.name) server again")
        } else {
            log("fleetlab serve: the \(decision.name) server stopped (\(why)); restarting it on port \(decision.port) in \(decision.delay) s")
            Thread.sleep(forTimeInterval: decision.delay)
        }
        guard !state.withLock({ $0.stopping || $0.workers[index].heldDown }) else { return }
        do {
            try spawn(index)
        } catch {
            log("fleetlab serve: \(error)")
        }
    }
}

extension ServerSupervisor {
    /// Plays the `down` windows of the timetable `current` gives (asked again at each
    /// turn: the plan can change), counted from its origin, on a thread of its own until
    /// `stop()`. With none, no worker is held down.
    public func playOutages(_ current: @escaping @Sendable () -> (timetable: FaultTimetable, origin: Date)?) {
        let player = Thread { [self] in
            while !state.withLock({ $0.stopping }) {
                let (timetable, origin) = current() ?? (FaultTimetable(windows: []), Date())
                let offset = Date().timeIntervalSince(origin)
                let count = state.withLock { $0.workers.count }
                for index in 0..<count { apply(timetable, to: index, at: offset) }
                // Wake at the next edge, and at least every half second to notice `stop()`.
                let next = timetable.nextChange(after: offset).map { $0 - offset } ?? 0.5
                Thread.sleep(forTimeInterval: min(0.5, max(0.005, next)))
            }
        }
        player.name = "fleetlab-fault-player"
        player.start()
    }

    /// Takes worker `index` down or brings it back as the timetable says for `offset`.
    func apply(_ timetable: FaultTimetable, to index: Int, at offset: Double) {
        enum Step { case none, kill(Int32, String), start(String) }
        let step: Step = state.withLock { s in
            guard !s.stopping else { return .none }
            var worker = s.workers[index]
            let down = timetable.isDown(worker.name, at: offset)
            defer { s.workers[index] = worker }
            switch (down, worker.heldDown) {
            case (true, false):
                worker.heldDown = true
                guard worker.pid > 0 else { return .kill(0, worker.name) }
                worker.killedForFault = true
                return .kill(worker.pid, worker.name)
            case (false, true):
                worker.heldDown = false
                // Reaped already: start it here; otherwise its watcher does when it reaps it.
                return worker.pid == 0 && !worker.killedForFault ? .start(worker.name) : .none
            case (true, true), (false, false):
                return .none
            }
        }
        switch step {
        case .none: return
        case .kill(let pid, let name):
            if pid > 0 { kill(pid, SIGKILL) }
            log("fleetlab serve: fault: the \(name) server is down (server-crash)")
        case .start(let name):
            log("fleetlab serve: fault over: starting the \(name) server again")
            do { try spawn(index) } catch { log("fleetlab serve: \(error)") }
        }
    }
}
