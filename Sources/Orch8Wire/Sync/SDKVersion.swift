/// A dotted numeric version (`0.7.1`), compared number by number.
public struct SDKVersion: Comparable, Sendable {
    public let parts: [Int]

    /// Nil for anything but non-empty dot-separated decimal numbers.
    public init?(_ text: String) {
        let pieces = text.split(separator: ".", omittingEmptySubsequences: false)
        guard !pieces.isEmpty else { return nil }
        var parts: [Int] = []
        for piece in pieces {
            guard !piece.isEmpty, piece.allSatisfy(\.isASCII), piece.allSatisfy(\.isNumber), let n = Int(piece) else { return nil }
            parts.append(n)
        }
        self.parts = parts
    }

    public static func < (a: SDKVersion, b: SDKVersion) -> Bool {
        for index in 0..<max(a.parts.count, b.parts.count) {
            let x = index < a.parts.count ? a.parts[index] : 0, y = index < b.parts.count ? b.parts[index] : 0
            if x != y { return x < y }
        }
        return false
    }

    public static func == (a: SDKVersion, b: SDKVersion) -> Bool { !(a < b) && !(b < a) }
}
