import Foundation
import LabStore
import LabTestSupport
import Simulator
import Testing

@Suite("Results pipeline: the writer thread")
struct ResultsPipelineTests {
    @Test("a pipeline dropped without finish (a command that fails after opening its results) writes what it was given and ends its writer")
    func droppedPipeline() async throws {
        let dir = TestPaths.scratchDirectory("pipeline-dropped")
        // Dropped at once, before its thread has run: the thread must not read a pipeline
        // that is gone (`fleetlab loadtest` with a bad chat URL aborted that way).
        for index in 0..<20 { _ = try ResultsPipeline(path: dir.appendingPathComponent("empty-\(index).sqlite").path) }
        let path = dir.appendingPathComponent("dropped.sqlite").path
        do {
            let pipeline = try ResultsPipeline(path: path)
            var batch = ResultsBatch()
            batch.runMetadata = [("reason", "dropped")]
            pipeline.submit(batch)
        }
        // The writer's last act is to leave WAL mode: once the -wal file is gone it is done,
        // and reading before that could hold the lock its checkpoint needs.
        let deadline = Date().addingTimeInterval(60)
        var stored: String?
        while stored == nil && Date() < deadline {
            if !FileManager.default.fileExists(atPath: path + "-wal") {
                stored = (try? SQLiteDatabase(path: path, readOnly: true).query("SELECT value FROM run WHERE key = 'reason'"))?.first?.first?.text
            }
            if stored == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(stored == "dropped")
    }
}
