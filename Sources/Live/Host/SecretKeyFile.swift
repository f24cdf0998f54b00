import Foundation
public import LabCrypto
import LabKernel

/// The key a served database's secrets are sealed under, in a file of its own beside the
/// database: 32 random bytes, hex, created with mode 0600 (owner only) the first time and
/// read on every start after. Whoever copies the database without this file gets none of
/// the secrets in it.
public enum SecretKeyFile {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public static func loadOrCreate(at path: String) throws -> SecretKey32 {
        if FileManager.default.fileExists(atPath: path) {
            let text = try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            guard let bytes = [UInt8](hex: text), bytes.count == SecretKey32.byteCount else {
                throw Failure(description: "\(path) is not a 32-byte hex key; restore it or start from an empty --data")
            }
            return try SecretKey32(bytes: bytes)
        }
        let bytes = SystemRandom.bytes(SecretKey32.byteCount)
        let created = FileManager.default.createFile(atPath: path, contents: Data(bytes.hexString.utf8),
                                                     attributes: [.posixPermissions: 0o600])
        guard created else { throw Failure(description: "cannot create the key file \(path)") }
        return try SecretKey32(bytes: bytes)
    }
}
