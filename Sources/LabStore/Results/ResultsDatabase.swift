#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// A results database file: created by the recorder's writer, read by reports and tests.
public final class ResultsDatabase {
    public let database: SQLiteDatabase

    /// Creates a new results database at `path`, replacing any file already there.
    public static func create(at path: String) throws -> ResultsDatabase {
        for suffix in ["", "-wal", "-shm"] { _ = unlink(path + suffix) }
        let db = try SQLiteDatabase(path: path)
        try ResultsSchema.create(in: db)
        return ResultsDatabase(database: db)
    }

    /// Opens an existing results database for reading; a clear error when it is not one.
    public static func open(at path: String) throws -> ResultsDatabase {
        guard access(path, R_OK) == 0 else { throw ResultsDatabaseError.unreadable(path) }
        let db = try SQLiteDatabase(path: path, readOnly: true)
        let tables = Set(try db.query("SELECT name FROM sqlite_master WHERE type = 'table'").compactMap { $0.first?.text })
        guard tables.contains("schema_info"), tables.contains("metric") else { throw ResultsDatabaseError.notResults(path) }
        let version = try db.query("SELECT version FROM schema_info").first?.first?.integer ?? 0
        guard version <= ResultsSchema.version else { throw ResultsDatabaseError.newerSchema(path, version) }
        return ResultsDatabase(database: db)
    }

    init(database: SQLiteDatabase) { self.database = database }

    /// Writes one batch in one transaction.
    public func write(_ batch: ResultsBatch) throws {
        guard !batch.isEmpty else { return }
        try database.transaction {
            if let s = batch.scenario {
                try database.run(
                    "INSERT INTO scenario (name, text, sha256, seed, start_time_of_day_ns, duration_ns, bucket_ns, devices, tick_mode) VALUES (?,?,?,?,?,?,?,?,?)",
                    [.text(s.name), .text(s.text), .text(s.sha256), .integer(Int64(bitPattern: s.seed)), .integer(s.startTimeOfDay),
                     .integer(s.durationNanoseconds), .integer(s.bucketNanoseconds), .integer(Int64(s.devices)), .text(s.tickMode)])
            }
            for c in batch.deviceClasses {
                try database.run("INSERT INTO device_class (id, name, count, first_device, parameters) VALUES (?,?,?,?,?)",
                                 [.integer(Int64(c.id)), .text(c.name), .integer(Int64(c.count)), .integer(Int64(c.firstDevice)), .text(c.parameters)])
            }
            for m in batch.metrics {
                try database.run(
                    "INSERT INTO metric (id, name, labels, kind, unit, precision_bits, description) VALUES (?,?,?,?,?,?,?)",
                    [.integer(Int64(m.id)), .text(m.name), .text(m.labels), .text(m.kind.rawValue), .text(m.unit),
                     m.precisionBits.map { .integer(Int64($0)) } ?? .null, .text(m.description)])
            }
            try writeSeries(batch.seriesPoints)
            try writeHistograms(batch.histogramBuckets)
            for total in batch.counterTotals {
                try database.run("INSERT OR REPLACE INTO counter_total (metric_id, value) VALUES (?,?)",
                                 [.integer(Int64(total.metricID)), .real(total.value)])
            }
            for e in batch.events {
                try database.run("INSERT INTO event_sample (seq, at_ns, device, kind, detail) VALUES (?,?,?,?,?)",
                                 [.integer(e.seq), .integer(e.at), e.device.map { .integer(Int64($0)) } ?? .null, .text(e.kind), .text(e.detail)])
            }
            for t in batch.thresholds {
                try database.run(
                    "INSERT INTO threshold_result (id, metric, statistic, op, bound, observed, passed, message) VALUES (?,?,?,?,?,?,?,?)",
                    [.integer(Int64(t.id)), .text(t.metric), .text(t.statistic), .text(t.op), .real(t.bound),
                     t.observed.map { .real($0) } ?? .null, .integer(t.passed ? 1 : 0), .text(t.message)])
            }
            for i in batch.invariants {
                try database.run("INSERT OR REPLACE INTO invariant_result (name, checks, violations, first_violation) VALUES (?,?,?,?)",
                                 [.text(i.name), .integer(i.checks), .integer(i.violations), i.firstViolation.map { .text($0) } ?? .null])
            }
            for entry in batch.runMetadata {
                try database.run("INSERT OR REPLACE INTO run (key, value) VALUES (?,?)", [.text(entry.key), .text(entry.value)])
            }
        }
    }

    private func writeSeries(_ points: [SeriesPointRow]) throws {
        guard !points.isEmpty else { return }
        let insert = try database.statement("INSERT INTO series_point (metric_id, bucket_start_ns, value) VALUES (?,?,?)")
        for p in points {
            try insert.bind(Int64(p.metricID), at: 1)
            try insert.bind(p.bucketStart, at: 2)
            try insert.bind(p.value, at: 3)
            try insert.execute()
        }
    }

    private func writeHistograms(_ rows: [HistogramBucketRow]) throws {
        guard !rows.isEmpty else { return }
        let insert = try database.statement(
            "INSERT INTO histogram_bucket (metric_id, window_start_ns, bucket_index, lower_bound, upper_bound, count) VALUES (?,?,?,?,?,?)")
        for r in rows {
            try insert.bind(Int64(r.metricID), at: 1)
            try insert.bind(r.windowStart, at: 2)
            try insert.bind(Int64(r.bucketIndex), at: 3)
            try insert.bind(Int64(bitPattern: r.lowerBound), at: 4)
            try insert.bind(Int64(bitPattern: r.upperBound), at: 5)
            try insert.bind(Int64(bitPattern: r.count), at: 6)
            try insert.execute()
        }
    }

    /// Folds the write-ahead log back into the file and leaves WAL mode, so the finished
    /// database is one self-contained file that readers open without side files.
    public func checkpoint() throws {
        try database.execute("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE;")
    }
}

public enum ResultsDatabaseError: Error, CustomStringConvertible, Equatable {
    case unreadable(String)
    case notResults(String)
    case newerSchema(String, Int64)

    public var description: String {
        switch self {
        case .unreadable(let path): return "cannot read \(path): no such file or no permission"
        case .notResults(let path): return "\(path) is not a fleetlab results database"
        case .newerSchema(let path, let v):
            return "\(path) has results schema version \(v); this fleetlab reads up to \(ResultsSchema.version)"
        }
    }
}
