public import LabKernel

/// A condition over an instance's context, as written in router, loop, `when` and
/// `break_on` fields: `context.data.terms_decision == 'declined'`.
///
/// The language is small and safe: literals (numbers, 'single' or "double" quoted strings,
/// true, false, null, [lists]), paths (`context.data.a.b[0]`, or a bare `a.b` meaning
/// `context.data.a.b`), comparison (`== != < <= > >=`), membership (`in`), `&& || !` and
/// parentheses. Expressions are parsed once when a sequence loads; evaluation never
/// fails: a missing path is null, and comparing different kinds is simply false.
public struct Expression: Sendable, Equatable, CustomStringConvertible {
    public let source: String
    let root: Node

    indirect enum Node: Sendable, Equatable {
        case literal(JSONValue)
        case path([PathComponent])
        case list([Node])
        case not(Node)
        case and(Node, Node)
        case or(Node, Node)
        case compare(Comparison, Node, Node)
    }

    enum PathComponent: Sendable, Equatable {
        case key(String)
        case index(Int)
    }

    enum Comparison: String, Sendable, Equatable {
        case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">=", contains = "in"
    }

    public var description: String { source }

    public static let maxLength = 4_096

    /// Parses `source`; the error names the position (1-based character offset).
    public init(parsing source: String) throws(ExpressionError) {
        // Chains of `&&` build trees as deep as they are long, and evaluation recurses:
        // the length bound keeps that depth (and the parser's time) small.
        guard source.utf8.count <= Self.maxLength else {
            throw ExpressionError(message: "a condition is at most \(Self.maxLength) bytes", position: 1)
        }
        var parser = ExpressionParser(source: source)
        self.source = source
        self.root = try parser.parse()
    }

    /// Evaluates against the instance's context data, to a truth value.
    public func isTrue(in data: ContextData) -> Bool {
        Self.truthy(Self.evaluate(root, data))
    }

    public func isTrue(in data: [String: JSONValue]) -> Bool { isTrue(in: ContextData(data)) }

    /// Evaluates to a value (used for `for_each` collections).
    public func value(in data: ContextData) -> JSONValue {
        Self.evaluate(root, data)
    }

    public func value(in data: [String: JSONValue]) -> JSONValue { value(in: ContextData(data)) }

    static func evaluate(_ node: Node, _ data: ContextData) -> JSONValue {
        switch node {
        case .literal(let value): return value
        case .list(let items): return .array(items.map { evaluate($0, data) })
        case .path(let components): return resolve(components, data)
        case .not(let inner): return .bool(!truthy(evaluate(inner, data)))
        case .and(let a, let b): return .bool(truthy(evaluate(a, data)) && truthy(evaluate(b, data)))
        case .or(let a, let b): return .bool(truthy(evaluate(a, data)) || truthy(evaluate(b, data)))
        case .compare(let op, let a, let b): return .bool(compare(op, evaluate(a, data), evaluate(b, data)))
        }
    }

    static func resolve(_ components: [PathComponent], _ data: ContextData) -> JSONValue {
        // The first key is looked up in the context itself (no merged copy of it).
        guard let first = components.first else { return data.json }
        guard case .key(let key) = first, var current = data[key] else { return .null }
        for component in components.dropFirst() {
            switch (component, current) {
            case (.key(let key), .object(let fields)): current = fields[key] ?? .null
            case (.index(let i), .array(let items)): current = i >= 0 && i < items.count ? items[i] : .null
            default: return .null
            }
        }
        return current
    }

    static func truthy(_ value: JSONValue) -> Bool {
        switch value {
        case .null: return false
        case .bool(let b): return b
        case .number(let n): return n != 0
        case .string(let s): return !s.isEmpty
        case .array(let a): return !a.isEmpty
        case .object(let o): return !o.isEmpty
        }
    }

    static func compare(_ op: Comparison, _ a: JSONValue, _ b: JSONValue) -> Bool {
        switch op {
        case .equal: return a == b
        case .notEqual: return a != b
        case .contains:
            switch b {
            case .array(let items): return items.contains(a)
            case .string(let s): if case .string(let needle) = a { return s.contains(needle) } else { return false }
            case .object(let o): if case .string(let key) = a { return o[key] != nil } else { return false }
            case .null, .bool, .number: return false
            }
        case .less, .lessOrEqual, .greater, .greaterOrEqual:
            let order: Int
            switch (a, b) {
            case (.number(let x), .number(let y)): order = x < y ? -1 : (x > y ? 1 : 0)
            case (.string(let x), .string(let y)): order = x < y ? -1 : (x > y ? 1 : 0)
            default: return false
            }
            switch op {
            case .less: return order < 0
            case .lessOrEqual: return order <= 0
            case .greater: return order > 0
            case .greaterOrEqual: return order >= 0
            case .equal, .notEqual, .contains: return false
            }
        }
    }
}

/// A condition that does not parse, with the 1-based character position.
public struct ExpressionError: Error, Equatable, CustomStringConvertible, Sendable {
    public var message: String
    public var position: Int
    public var description: String { "\(message) at position \(position)" }
}
