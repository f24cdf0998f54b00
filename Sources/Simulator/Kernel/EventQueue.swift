public import LabKernel

/// A handle to a scheduled event, for cancellation.
public struct EventToken: Hashable, Sendable {
    public let sequence: UInt64

    @inlinable
    init(sequence: UInt64) { self.sequence = sequence }
}

/// The pending events of a simulation, earliest first, ties broken by insertion order.
///
/// A 4-ary implicit min-heap keyed by (time, sequence). Four children per node halve the
/// depth of a binary heap and keep a node's children in one cache line, which is where a
/// hold-model workload (pop one, push one) spends its time. Payloads are small value types
/// stored inline: no closure, box or class per event, so the hot path allocates only when
/// the array grows.
///
/// Cancellation is lazy: a cancelled sequence number is remembered and its entry dropped
/// when it reaches the top. Simulations cancel rarely (devices use generation numbers),
/// so the set is almost always empty and costs one branch per pop.
public struct EventQueue<Payload> {
    @usableFromInline
    struct Entry {
        @usableFromInline var time: Int64
        @usableFromInline var sequence: UInt64
        @usableFromInline var payload: Payload

        @inlinable
        init(time: Int64, sequence: UInt64, payload: Payload) {
            self.time = time
            self.sequence = sequence
            self.payload = payload
        }

        @inlinable
        func precedes(_ other: Entry) -> Bool {
            time < other.time || (time == other.time && sequence < other.sequence)
        }
    }

    @usableFromInline var heap: [Entry] = []
    @usableFromInline var nextSequence: UInt64 = 0
    @usableFromInline var cancelled: Set<UInt64> = []

    public init(reservingCapacity capacity: Int = 0) {
        heap.reserveCapacity(capacity)
    }

    /// Pending events, cancelled ones excluded.
    public var count: Int { heap.count - cancelled.count }
    public var isEmpty: Bool { count == 0 }

    /// Schedules `payload` at `time`; events at equal times run in scheduling order.
    @inlinable
    @discardableResult
    public mutating func schedule(_ payload: Payload, at time: Instant) -> EventToken {
        let sequence = nextSequence
        nextSequence &+= 1
        heap.append(Entry(time: time.nanoseconds, sequence: sequence, payload: payload))
        siftUp(from: heap.count - 1)
        return EventToken(sequence: sequence)
    }

    /// Cancels a pending event; cancelling one that already ran or was cancelled is a no-op.
    public mutating func cancel(_ token: EventToken) {
        guard token.sequence < nextSequence, heap.contains(where: { $0.sequence == token.sequence }) else { return }
        cancelled.insert(token.sequence)
    }

    /// The time of the earliest pending event.
    public mutating func peekTime() -> Instant? {
        dropCancelledTop()
        return heap.first.map { Instant(nanoseconds: $0.time) }
    }

    /// Removes and returns the earliest pending event.
    @inlinable
    public mutating func pop() -> (time: Instant, payload: Payload)? {
        while true {
            guard let top = popRaw() else { return nil }
            if cancelled.isEmpty || cancelled.remove(top.sequence) == nil {
                return (Instant(nanoseconds: top.time), top.payload)
            }
        }
    }

    /// Removes the earliest event if it is due strictly before `limit`.
    @inlinable
    public mutating func pop(before limit: Instant) -> (time: Instant, payload: Payload)? {
        while let top = heap.first, top.time < limit.nanoseconds {
            let entry = popRaw()!
            if cancelled.isEmpty || cancelled.remove(entry.sequence) == nil {
                return (Instant(nanoseconds: entry.time), entry.payload)
            }
        }
        return nil
    }

    mutating func dropCancelledTop() {
        while let top = heap.first, !cancelled.isEmpty, cancelled.contains(top.sequence) {
            cancelled.remove(top.sequence)
            _ = popRaw()
        }
    }

    @inlinable
    mutating func popRaw() -> Entry? {
        guard let last = heap.popLast() else { return nil }
        if heap.isEmpty { return last }
        let top = heap[0]
        siftDown(placing: last)
        return top
    }

    @inlinable
    mutating func siftUp(from start: Int) {
        heap.withUnsafeMutableBufferPointer { h in
            let moving = h[start]
            var index = start
            while index > 0 {
                let parent = (index - 1) >> 2
                guard moving.precedes(h[parent]) else { break }
                h[index] = h[parent]
                index = parent
            }
            h[index] = moving
        }
    }

    /// Places `moving` into the hole at the root and sifts it down.
    @inlinable
    mutating func siftDown(placing moving: Entry) {
        heap.withUnsafeMutableBufferPointer { h in
            let count = h.count
            var index = 0
            while true {
                let first = 4 * index + 1
                if first >= count { break }
                var best = first
                let end = Swift.min(first + 4, count)
                var child = first + 1
                while child < end {
                    if h[child].precedes(h[best]) { best = child }
                    child += 1
                }
                guard h[best].precedes(moving) else { break }
                h[index] = h[best]
                index = best
            }
            h[index] = moving
        }
    }
}
