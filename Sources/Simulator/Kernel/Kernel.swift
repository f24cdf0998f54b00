public import LabKernel

/// A world the kernel drives: it owns the simulated state and turns each event into
/// state changes and further events.
///
/// The kernel sets `now` before every dispatch (NIO's EmbeddedEventLoop rule); a world
/// never reads a clock and never schedules in the past.
public protocol SimulationWorld {
    associatedtype Event
    mutating func handle(_ event: Event, at now: Instant, queue: inout EventQueue<Event>)
}

/// When a run stops.
public enum StopCondition<World> {
    /// Process every event strictly before this instant, then set `now` to it.
    case time(Instant)
    /// Process this many more events.
    case events(UInt64)
    /// Stop as soon as the predicate holds (checked after each event).
    case predicate((borrowing World) -> Bool)
}

/// What a progress callback sees.
public struct KernelProgress: Sendable {
    public var now: Instant
    public var eventsProcessed: UInt64
    public var pending: Int
}

/// Why a run returned.
public enum KernelStopReason: Equatable, Sendable {
    case reachedTime
    case reachedEventCount
    case predicateHeld
    case queueEmpty
    case stoppedByProgress
}

/// The discrete-event kernel: one thread, a virtual clock and an event queue.
///
/// Theory of operation: pop the earliest event, set `now`, hand it to the world, which
/// may schedule more; repeat until the stop condition. Everything that happens in a run
/// is an event in this queue, so a run is a pure function of the initial world, the
/// initial events and the seed the world draws from.
public struct Kernel<World: SimulationWorld> {
    public var world: World
    public var queue: EventQueue<World.Event>
    public private(set) var now: Instant = .zero
    public private(set) var eventsProcessed: UInt64 = 0

    public init(world: World, queue: EventQueue<World.Event> = EventQueue()) {
        self.world = world
        self.queue = queue
    }

    public mutating func schedule(_ event: World.Event, at time: Instant) -> EventToken {
        precondition(time >= now, "cannot schedule into the past (\(time) < \(now))")
        return queue.schedule(event, at: time)
    }

    /// Runs until `stop`; `progress` is called every `progressInterval` events and may
    /// return false to stop the run early (Ctrl-C, a time budget).
    public mutating func run(
        until stop: StopCondition<World>,
        progressInterval: UInt64 = 1 << 16,
        progress: ((KernelProgress) -> Bool)? = nil
    ) -> KernelStopReason {
        let interval = Swift.max(1, progressInterval)
        var nextReport = eventsProcessed + interval
        switch stop {
        case .time(let limit):
            while let (time, event) = queue.pop(before: limit) {
                dispatch(event, at: time)
                if eventsProcessed == nextReport {
                    nextReport += interval
                    if let progress, !progress(snapshot) { return .stoppedByProgress }
                }
            }
            if limit > now { now = limit }
            return .reachedTime
        case .events(let count):
            let target = eventsProcessed + count
            while eventsProcessed < target {
                guard let (time, event) = queue.pop() else { return .queueEmpty }
                dispatch(event, at: time)
                if eventsProcessed == nextReport {
                    nextReport += interval
                    if let progress, !progress(snapshot) { return .stoppedByProgress }
                }
            }
            return .reachedEventCount
        case .predicate(let holds):
            while let (time, event) = queue.pop() {
                dispatch(event, at: time)
                if holds(world) { return .predicateHeld }
                if eventsProcessed == nextReport {
                    nextReport += interval
                    if let progress, !progress(snapshot) { return .stoppedByProgress }
                }
            }
            return .queueEmpty
        }
    }

    mutating func dispatch(_ event: World.Event, at time: Instant) {
        now = time
        eventsProcessed &+= 1
        world.handle(event, at: time, queue: &queue)
    }

    public var snapshot: KernelProgress {
        KernelProgress(now: now, eventsProcessed: eventsProcessed, pending: queue.count)
    }
}
