internal import CSodium
import LabKernel

/// Argon2id password hashes (`crypto_pwhash`), encoded
/// `argon2id$<opslimit>$<memlimit>$<salt hex>$<hash hex>`. The salt is an input, so a
/// server core hashes deterministically from its seeded stream; the cost is data, so a
/// simulation of thousands of logins can use the minimum while a live server uses
/// libsodium's interactive limits.
public enum PasswordHash {
    public struct Cost: Sendable, Equatable {
        public var opsLimit: UInt64
        public var memLimit: Int

        public init(opsLimit: UInt64, memLimit: Int) {
            self.opsLimit = opsLimit
            self.memLimit = memLimit
        }

        /// `crypto_pwhash_OPSLIMIT_INTERACTIVE` / `MEMLIMIT_INTERACTIVE` (2, 64 MiB).
        public static let interactive = Cost(opsLimit: 2, memLimit: 64 << 20)
        /// The Argon2id minimum (1 pass, 8 KiB): for simulations and tests.
        public static let minimum = Cost(opsLimit: 1, memLimit: 8 << 10)
    }

    public static let saltCount = 16
    static let hashCount = 32

    public static func hash(_ password: String, salt: [UInt8], cost: Cost) throws(CryptoError) -> String {
        guard salt.count == saltCount else { throw .badLength(what: "password salt", expected: saltCount, found: salt.count) }
        let bytes = try derive(password, salt: salt, opsLimit: cost.opsLimit, memLimit: cost.memLimit)
        return "argon2id$\(cost.opsLimit)$\(cost.memLimit)$\(salt.hexString)$\(bytes.hexString)"
    }

    /// An encoding no password matches, that costs `cost` to check: what a login for an
    /// unknown username is verified against, so it takes as long as a known one.
    public static func unmatchable(cost: Cost) -> String {
        "argon2id$\(cost.opsLimit)$\(cost.memLimit)$\([UInt8](repeating: 0, count: saltCount).hexString)$\([UInt8](repeating: 0, count: hashCount).hexString)"
    }

    /// Whether `password` matches `encoded`, compared in constant time. A malformed
    /// encoding never matches.
    public static func verify(_ password: String, encoded: String) -> Bool {
        let parts = encoded.split(separator: "$").map(String.init)
        guard parts.count == 5, parts[0] == "argon2id", let ops = UInt64(parts[1]), let mem = Int(parts[2]),
              let salt = [UInt8](hex: parts[3]), salt.count == saltCount, let expected = [UInt8](hex: parts[4]),
              let actual = try? derive(password, salt: salt, opsLimit: ops, memLimit: mem) else { return false }
        return ConstantTime.equal(actual, expected)
    }

    static func derive(_ password: String, salt: [UInt8], opsLimit: UInt64, memLimit: Int) throws(CryptoError) -> [UInt8] {
        Sodium.ensureReady()
        var out = [UInt8](repeating: 0, count: hashCount)
        // A terminating NUL keeps the pointer valid for an empty password; it is not hashed.
        let text = Array(password.utf8).map { CChar(bitPattern: $0) } + [0]
        let status = crypto_pwhash(&out, UInt64(hashCount), text, UInt64(text.count - 1), salt, opsLimit, memLimit, crypto_pwhash_ALG_ARGON2ID13)
        guard status == 0 else { throw .badKey("Argon2id refused its parameters (ops \(opsLimit), memory \(memLimit))") }
        return out
    }
}
