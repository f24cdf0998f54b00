internal import CSodium
import LabKernel

/// A SHA-256 over every deterministic table of a results database, in canonical row
/// order. Same scenario, seed and build must give the same digest; the `run` table (wall
/// time, host, paths) is left out on purpose.
public enum ResultsDigest {
    public static func compute(_ results: ResultsDatabase) throws -> String {
        try digest(of: results, queries: ResultsSchema.deterministicTables.map { ($0.name, "SELECT * FROM \($0.name) ORDER BY \($0.orderBy)") })
    }

    /// The digest a sharded run's merge shares with the single-process run of the same
    /// scenario, seed and build (when its devices share no server): the scenario, the
    /// populations, every histogram and every counter of whole events, keyed by metric name
    /// and labels rather than by id (ids follow registration order, which differs between
    /// shards). Left out: series and real-valued counters (seconds, joules, bytes), whose
    /// sums differ in the last bits when added in another order; `sim.events`, which counts
    /// each shard's own bucket ends; event samples, drawn per process.
    public static func fleet(_ results: ResultsDatabase) throws -> String {
        try digest(of: results, queries: [
            ("scenario", "SELECT name, text, sha256, seed, start_time_of_day_ns, duration_ns, bucket_ns, devices, tick_mode FROM scenario"),
            ("device_class", "SELECT id, name, count, first_device, parameters FROM device_class ORDER BY id"),
            ("histogram_bucket", """
                SELECT m.name, m.labels, h.window_start_ns, h.bucket_index, h.lower_bound, h.upper_bound, h.count
                FROM histogram_bucket h JOIN metric m ON m.id = h.metric_id ORDER BY m.name, m.labels, h.window_start_ns, h.bucket_index
                """),
            ("counter_total", """
                SELECT m.name, m.labels, c.value FROM counter_total c JOIN metric m ON m.id = c.metric_id
                WHERE m.unit = 'count' AND m.name <> 'sim.events' ORDER BY m.name, m.labels
                """),
        ])
    }

    static func digest(of results: ResultsDatabase, queries: [(name: String, sql: String)]) throws -> String {
        var state = crypto_hash_sha256_state()
        crypto_hash_sha256_init(&state)
        func absorb(_ bytes: [UInt8]) {
            _ = bytes.withUnsafeBufferPointer { crypto_hash_sha256_update(&state, $0.baseAddress, UInt64($0.count)) }
        }
        for query in queries {
            absorb(Array("table:\(query.name)\n".utf8))
            // Row by row: a long run's histogram table read whole would cost several
            // times the database file in memory, at the end of the run.
            try results.database.forEachRow(query.sql) { row in
                for column in 0..<row.columnCount { absorb(encode(row.value(at: column))) }
                absorb([0x0A])
                return true
            }
        }
        var digest = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        crypto_hash_sha256_final(&state, &digest)
        return digest.hexString
    }

    private static func encode(_ value: SQLiteValue) -> [UInt8] {
        func tagged(_ tag: UInt8, _ payload: [UInt8]) -> [UInt8] {
            var bytes = [tag]
            withUnsafeBytes(of: UInt32(payload.count).littleEndian) { bytes.append(contentsOf: $0) }
            return bytes + payload
        }
        switch value {
        case .null: return [0]
        case .integer(let v): return withUnsafeBytes(of: v.littleEndian) { tagged(1, Array($0)) }
        case .real(let v): return withUnsafeBytes(of: v.bitPattern.littleEndian) { tagged(2, Array($0)) }
        case .text(let v): return tagged(3, Array(v.utf8))
        case .blob(let v): return tagged(4, v)
        }
    }
}

/// SHA-256 of a string as lowercase hex (scenario hashes).
public enum SHA256Hex {
    public static func of(_ text: String) -> String {
        var digest = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        let bytes = Array(text.utf8)
        crypto_hash_sha256(&digest, bytes, UInt64(bytes.count))
        return digest.hexString
    }
}
