import Foundation

extension ChatClient.Snapshot {
    /// The snapshot as bytes for the device's storage. It holds tokens and private keys:
    /// the app keeps it where the platform protects secrets (file mode 0600 at least).
    public func encoded() throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(self))
    }

    /// A snapshot read back from `encoded()`; a corrupt file is an error, never a crash.
    public init(encoded bytes: [UInt8]) throws {
        self = try JSONDecoder().decode(Self.self, from: Data(bytes))
    }
}
