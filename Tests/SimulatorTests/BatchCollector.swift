import Foundation
import LabStore

/// Keeps every results batch a world hands out, for tests that inspect rows.
final class BatchCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var batches: [ResultsBatch] = []

    func append(_ batch: ResultsBatch) {
        lock.lock()
        batches.append(batch)
        lock.unlock()
    }

    var all: [ResultsBatch] {
        lock.lock()
        defer { lock.unlock() }
        return batches
    }

    /// A metric's series values in bucket order.
    func series(_ metricID: Int) -> [Double] {
        all.flatMap(\.seriesPoints).filter { $0.metricID == metricID }.sorted { $0.bucketStart < $1.bucketStart }.map(\.value)
    }
}
