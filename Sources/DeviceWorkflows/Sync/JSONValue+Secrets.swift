package import LabKernel

/// Finding and blanking secrets in handler params and outputs (credential delegation).
extension JSONValue {
    /// Whether any string in the value starts with `prefix`.
    package func containsString(prefix: String) -> Bool {
        switch self {
        case .string(let s): return s.hasPrefix(prefix)
        case .array(let items): return items.contains { $0.containsString(prefix: prefix) }
        case .object(let fields): return fields.values.contains { $0.containsString(prefix: prefix) }
        case .null, .bool, .number: return false
        }
    }

    /// Every string in the value (keys excluded).
    package var strings: Set<String> {
        switch self {
        case .string(let s): return [s]
        case .array(let items): return items.reduce(into: Set<String>()) { $0.formUnion($1.strings) }
        case .object(let fields): return fields.values.reduce(into: Set<String>()) { $0.formUnion($1.strings) }
        case .null, .bool, .number: return []
        }
    }

    package func replacingStrings(in set: Set<String>, with replacement: String) -> JSONValue {
        switch self {
        case .string(let s): return set.contains(s) ? .string(replacement) : self
        case .array(let items): return .array(items.map { $0.replacingStrings(in: set, with: replacement) })
        case .object(let fields): return .object(fields.mapValues { $0.replacingStrings(in: set, with: replacement) })
        case .null, .bool, .number: return self
        }
    }
}
