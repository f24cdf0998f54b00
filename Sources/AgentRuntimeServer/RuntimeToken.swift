public import LabKernel
import LabCrypto

/// The runtime's bearer tokens: JWTs signed with HMAC-SHA256 (HS256) under the server's
/// key, carrying the principal (`sub`/`user_id`) and the tenant (`app_id`). The key stays
/// with the server (a file under `--data`); `fleetlab token` mints with the same key.
///
/// Verification takes `now` (the core's clock) and accepts only `alg: HS256`: a token that
/// names `none` or another algorithm is refused, whatever its signature says.
public struct RuntimeToken: Sendable, Equatable {
    public var appID: String
    public var userID: String
    public var issuedAt: Int64
    public var expiresAt: Int64

    public init(appID: String, userID: String, issuedAt: Int64, expiresAt: Int64) {
        self.appID = appID
        self.userID = userID
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }

    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        case malformed
        case badSignature
        case unsupportedAlgorithm(String)
        case expired
        case missingClaim(String)

        public var description: String {
            switch self {
            case .malformed: return "Malformed token"
            case .badSignature: return "Invalid token signature"
            case .unsupportedAlgorithm(let alg): return "Unsupported token algorithm '\(alg.prefix(16))'"
            case .expired: return "Token expired"
            case .missingClaim(let claim): return "Token has no '\(claim)' claim"
            }
        }
    }

    /// The signed token text.
    public func sign(key: [UInt8]) -> String {
        let header = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let claims: JSONValue = ["sub": .string(userID), "user_id": .string(userID), "app_id": .string(appID),
                                 "iat": .number(Double(issuedAt)), "exp": .number(Double(expiresAt))]
        let body = Base64URL.encode(Array(claims.canonicalText.utf8))
        let signed = header + "." + body
        return signed + "." + Base64URL.encode(HMACSHA256.mac(key: key, message: Array(signed.utf8)))
    }

    /// Checks a token's signature, algorithm and expiry at `unixSeconds`.
    public static func verify(_ text: String, key: [UInt8], unixSeconds: Int64) throws(Failure) -> RuntimeToken {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, text.utf8.count <= 4_096,
              let headerBytes = Base64URL.decode(String(parts[0])), let bodyBytes = Base64URL.decode(String(parts[1])),
              let signature = Base64URL.decode(String(parts[2])),
              let header = try? JSONValue.parse(bytes: headerBytes), let claims = try? JSONValue.parse(bytes: bodyBytes) else {
            throw .malformed
        }
        guard let alg = header["alg"]?.stringValue else { throw .malformed }
        guard alg == "HS256" else { throw .unsupportedAlgorithm(alg) }
        let expected = HMACSHA256.mac(key: key, message: Array((parts[0] + "." + parts[1]).utf8))
        guard ConstantTime.equal(expected, signature) else { throw .badSignature }
        guard let user = claims["sub"]?.stringValue ?? claims["user_id"]?.stringValue, !user.isEmpty else { throw .missingClaim("sub") }
        guard let app = claims["app_id"]?.stringValue, !app.isEmpty else { throw .missingClaim("app_id") }
        guard let exp = claims["exp"]?.numberValue else { throw .missingClaim("exp") }
        guard Double(unixSeconds) < exp else { throw .expired }
        return RuntimeToken(appID: app, userID: user, issuedAt: Int64(claims["iat"]?.numberValue ?? 0), expiresAt: Int64(exp))
    }
}

/// Comparison whose time does not depend on where two byte strings first differ.
enum ConstantTime {
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}
