internal import CSodium
import LabKernel

/// Secrets at rest (`crypto_secretbox_easy`: XSalsa20-Poly1305): a server's database holds
/// credential values and signing seeds sealed under a key kept in a file beside it, so a
/// copy of the database alone gives none of them. Sealed text is `sb1:` and base64 of
/// `nonce (24) || ciphertext`; the nonce is random (`randombytes_buf`): this is for
/// stores (adapters), never for a core's deterministic output.
public enum SecretBox {
    public static let prefix = "sb1:"
    static let nonceCount = 24
    static let macCount = 16

    public static func seal(_ plaintext: String, key: SecretKey32) -> String {
        Sodium.ensureReady()
        let message = Array(plaintext.utf8)
        let nonce = SystemRandom.bytes(nonceCount)
        var out = [UInt8](repeating: 0, count: message.count + macCount)
        key.withBytes { k in
            _ = crypto_secretbox_easy(&out, message, UInt64(message.count), nonce, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return prefix + Base64.encode(nonce + out)
    }

    /// The plaintext of sealed text; nil when it is not sealed text or does not open
    /// under `key` (another key, or altered).
    public static func open(_ sealed: String, key: SecretKey32) -> String? {
        guard sealed.hasPrefix(prefix), let bytes = Base64.decode(String(sealed.dropFirst(prefix.count))),
              bytes.count >= nonceCount + macCount else { return nil }
        Sodium.ensureReady()
        let nonce = Array(bytes[..<nonceCount]), box = Array(bytes[nonceCount...])
        var out = [UInt8](repeating: 0, count: box.count - macCount)
        let ok = key.withBytes { k in
            crypto_secretbox_open_easy(&out, box, UInt64(box.count), nonce, k.baseAddress!.assumingMemoryBound(to: UInt8.self)) == 0
        }
        return ok ? String(validating: out, as: UTF8.self) : nil
    }

    public static func isSealed(_ text: String) -> Bool { text.hasPrefix(prefix) }
}
