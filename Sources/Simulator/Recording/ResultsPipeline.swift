import Foundation
public import LabStore

/// Writes results batches on a thread of its own, so SQLite never stalls the simulation.
///
/// The simulation thread submits a batch per time bucket and goes on; the writer commits
/// each batch in one transaction. The queue is bounded: if the writer falls behind by more
/// than `maxQueued` batches, `submit` waits, which keeps memory flat on huge runs. Batches
/// are written in submission order, so the file's contents are deterministic.
public final class ResultsPipeline: @unchecked Sendable {
    // Unchecked: the writer's state is touched under its condition.
    private let writer: Writer
    public var rowsWritten: Int { writer.locked { $0.rowsWritten } }
    public var batchesWritten: Int { writer.locked { $0.batchesWritten } }

    /// Creates the database at `path` now (so a bad path fails before the run) and starts
    /// the writer, which from then on owns the connection.
    public init(path: String, maxQueued: Int = 8) throws {
        let results = try ResultsDatabase.create(at: path)
        writer = Writer(maxQueued: maxQueued)
        let transfer = ConnectionTransfer(results: results)
        // The thread holds the writer, not the pipeline: a pipeline dropped without
        // `finish` (a command that fails after opening its results) ends the thread
        // from its deinit, and the thread never reads a pipeline that is gone.
        let thread = Thread { [writer] in writer.run(transfer.results) }
        thread.name = "fleetlab-results-writer"
        thread.start()
    }

    deinit { writer.close() }

    public func submit(_ batch: ResultsBatch) {
        guard !batch.isEmpty else { return }
        writer.submit(batch)
    }

    /// Waits until every submitted batch is written; rethrows the writer's first error.
    public func finish() throws {
        try writer.finish()
    }

    /// The queue between the simulation and the writer thread, and what the writer did.
    private final class Writer: @unchecked Sendable {
        // Unchecked: every field is touched under `condition`.
        let condition = NSCondition()
        var queue: [ResultsBatch] = []
        var finished = false
        var failure: (any Error)?
        var done = false
        let maxQueued: Int
        var rowsWritten = 0
        var batchesWritten = 0

        init(maxQueued: Int) { self.maxQueued = maxQueued }

        func locked<T>(_ body: (Writer) -> T) -> T {
            condition.lock()
            defer { condition.unlock() }
            return body(self)
        }

        func submit(_ batch: ResultsBatch) {
            condition.lock()
            while queue.count >= maxQueued && failure == nil { condition.wait() }
            queue.append(batch)
            condition.broadcast()
            condition.unlock()
        }

        /// No more batches: the writer writes what is queued and ends.
        func close() {
            condition.lock()
            finished = true
            condition.broadcast()
            condition.unlock()
        }

        func finish() throws {
            close()
            condition.lock()
            while !done { condition.wait() }
            let error = failure
            condition.unlock()
            if let error { throw error }
        }

        func run(_ results: ResultsDatabase) {
            while true {
                condition.lock()
                while queue.isEmpty && !finished { condition.wait() }
                if queue.isEmpty && finished {
                    if failure == nil {
                        do { try results.checkpoint() } catch { failure = error }
                    }
                    done = true
                    condition.broadcast()
                    condition.unlock()
                    return
                }
                let batch = queue.removeFirst()
                condition.broadcast()
                condition.unlock()
                guard failure == nil else { continue }
                do {
                    try results.write(batch)
                    condition.lock()
                    rowsWritten += batch.rowCount
                    batchesWritten += 1
                    condition.unlock()
                } catch {
                    condition.lock()
                    failure = error
                    condition.broadcast()
                    condition.unlock()
                }
            }
        }
    }
}

/// Hands the connection to the writer thread, which becomes its only user.
private final class ConnectionTransfer: @unchecked Sendable {
    let results: ResultsDatabase
    init(results: ResultsDatabase) { self.results = results }
}
