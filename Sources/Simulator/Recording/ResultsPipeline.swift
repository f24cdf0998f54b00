import Foundation
public import LabStore

/// Writes results batches on a thread of its own, so SQLite never stalls the simulation.
///
/// The simulation thread submits a batch per time bucket and goes on; the writer commits
/// each batch in one transaction. The queue is bounded: if the writer falls behind by more
/// than `maxQueued` batches, `submit` waits, which keeps memory flat on huge runs. Batches
/// are written in submission order, so the file's contents are deterministic.
public final class ResultsPipeline: @unchecked Sendable {
    private let condition = NSCondition()
    private var queue: [ResultsBatch] = []
    private var finished = false
    private var failure: (any Error)?
    private var done = false
    private let maxQueued: Int
    private var thread: Thread?
    public private(set) var rowsWritten = 0
    public private(set) var batchesWritten = 0

    /// Creates the database at `path` now (so a bad path fails before the run) and starts
    /// the writer, which from then on owns the connection.
    public init(path: String, maxQueued: Int = 8) throws {
        let results = try ResultsDatabase.create(at: path)
        self.maxQueued = maxQueued
        let transfer = ConnectionTransfer(results: results)
        let thread = Thread { [unowned self] in self.writerLoop(transfer.results) }
        thread.name = "fleetlab-results-writer"
        self.thread = thread
        thread.start()
    }

    public func submit(_ batch: ResultsBatch) {
        guard !batch.isEmpty else { return }
        condition.lock()
        while queue.count >= maxQueued && failure == nil { condition.wait() }
        queue.append(batch)
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until every submitted batch is written; rethrows the writer's first error.
    public func finish() throws {
        condition.lock()
        finished = true
        condition.broadcast()
        while !done { condition.wait() }
        let error = failure
        condition.unlock()
        if let error { throw error }
    }

    private func writerLoop(_ results: ResultsDatabase) {
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
                rowsWritten += batch.rowCount
                batchesWritten += 1
            } catch {
                condition.lock()
                failure = error
                condition.broadcast()
                condition.unlock()
            }
        }
    }
}

/// Hands the connection to the writer thread, which becomes its only user.
private final class ConnectionTransfer: @unchecked Sendable {
    let results: ResultsDatabase
    init(results: ResultsDatabase) { self.results = results }
}
