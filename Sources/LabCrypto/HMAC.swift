internal import CSodium

/// HMAC-SHA256 with a key of any length (`crypto_auth_hmacsha256_init/update/final`), and
/// HKDF (RFC 5869) built on it: libsodium 1.0.18 has no HKDF of its own.
public enum HMACSHA256 {
    public static let byteCount = 32

    public static func mac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        key.withUnsafeBytes { k in
            message.withUnsafeBytes { m in out.withUnsafeMutableBytes { mac(key: k, message: m, into: $0) } }
        }
        return out
    }

    /// The MAC of `message` under `key`, written to the first 32 bytes of `out`.
    public static func mac(key: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        mac(key: key, message, .empty, .empty, into: out)
    }

    /// The MAC of `a || b || c`, without building the concatenation (no allocation).
    public static func mac(key: UnsafeRawBufferPointer, _ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, _ c: UnsafeRawBufferPointer,
                           into out: UnsafeMutableRawBufferPointer) {
        Sodium.ensureReady()
        precondition(out.count >= byteCount)
        var state = crypto_auth_hmacsha256_state()
        var none: UInt8 = 0
        if let base = key.baseAddress, key.count > 0 {
            _ = crypto_auth_hmacsha256_init(&state, base.assumingMemoryBound(to: UInt8.self), key.count)
        } else {
            _ = crypto_auth_hmacsha256_init(&state, &none, 0)
        }
        if a.count > 0 { _ = crypto_auth_hmacsha256_update(&state, a.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(a.count)) }
        if b.count > 0 { _ = crypto_auth_hmacsha256_update(&state, b.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(b.count)) }
        if c.count > 0 { _ = crypto_auth_hmacsha256_update(&state, c.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(c.count)) }
        _ = crypto_auth_hmacsha256_final(&state, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
        withUnsafeMutableBytes(of: &state) { sodium_memzero($0.baseAddress, $0.count) }
    }

    /// `HMAC(key, [byte])`: the chain steps of the ratchet and of sender keys.
    public static func mac(key: UnsafeRawBufferPointer, byte: UInt8, into out: UnsafeMutableRawBufferPointer) {
        withUnsafeBytes(of: byte) { mac(key: key, $0, .empty, .empty, into: out) }
    }
}

extension UnsafeRawBufferPointer {
    static var empty: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: nil, count: 0) }
}

public enum HKDF {
    /// RFC 5869 HKDF-SHA256 of `count` (≤ 255 × 32) bytes.
    public static func derive(salt: [UInt8], ikm: [UInt8], info: [UInt8], count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        salt.withUnsafeBytes { s in
            ikm.withUnsafeBytes { i in info.withUnsafeBytes { n in out.withUnsafeMutableBytes { derive(salt: s, ikm: i, info: n, into: $0) } } }
        }
        return out
    }

    /// HKDF into `out` (its whole length). An empty salt means 32 zero bytes, as RFC 5869 says.
    public static func derive(salt: UnsafeRawBufferPointer, ikm: UnsafeRawBufferPointer, info: UnsafeRawBufferPointer,
                              into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count <= 255 * HMACSHA256.byteCount)
        // 32 + 32 bytes of scratch on the stack: the PRK and the previous block T(i-1).
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 2 * HMACSHA256.byteCount) { scratch in
            let raw = UnsafeMutableRawBufferPointer(scratch)
            let prk = UnsafeMutableRawBufferPointer(rebasing: raw[0..<32])
            let block = UnsafeMutableRawBufferPointer(rebasing: raw[32..<64])
            if salt.count == 0 {
                withUnsafeBytes(of: ZeroSalt.bytes) { HMACSHA256.mac(key: $0, message: ikm, into: prk) }
            } else {
                HMACSHA256.mac(key: salt, message: ikm, into: prk)
            }
            var written = 0
            var counter: UInt8 = 1
            while written < out.count {
                let previous = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(block)[0..<(counter == 1 ? 0 : 32)])
                withUnsafeBytes(of: counter) { c in
                    HMACSHA256.mac(key: UnsafeRawBufferPointer(prk), previous, info, c, into: block)
                }
                let take = min(32, out.count - written)
                UnsafeMutableRawBufferPointer(rebasing: out[written..<(written + take)]).copyMemory(from: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(block)[0..<take]))
                written += take
                counter &+= 1
            }
            sodium_memzero(raw.baseAddress, raw.count)
        }
    }
}

/// 32 zero bytes as a tuple, so it lives on the stack.
enum ZeroSalt {
    static let bytes: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
}
