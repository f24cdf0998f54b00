internal import CSodium
import LabKernel

/// A SHA-256 over every deterministic table of a results database, in canonical row
/// order. Same scenario, seed and build must give the same digest; the `run` table (wall
/// time, host, paths) is left out on purpose.
public enum ResultsDigest {
    public static func compute(_ results: ResultsDatabase) throws -> String {
        var state = crypto_hash_sha256_state()
        crypto_hash_sha256_init(&state)
        func absorb(_ bytes: [UInt8]) {
            _ = bytes.withUnsafeBufferPointer { crypto_hash_sha256_update(&state, $0.baseAddress, UInt64($0.count)) }
        }
        for table in ResultsSchema.deterministicTables {
            absorb(Array("table:\(table.name)\n".utf8))
            for row in try results.database.query("SELECT * FROM \(table.name) ORDER BY \(table.orderBy)") {
                for value in row { absorb(encode(value)) }
                absorb([0x0A])
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
