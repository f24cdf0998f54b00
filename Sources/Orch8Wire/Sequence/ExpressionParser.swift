import LabKernel

/// Recursive-descent parser for `Expression`. Precedence, loosest first:
/// `||`, `&&`, `!`, comparison / `in`, primary.
struct ExpressionParser {
    enum Token: Equatable {
        case number(Double), string(String), identifier(String)
        case symbol(String)
        case end
    }

    let characters: [Character]
    var index = 0
    var token: Token = .end
    var tokenStart = 0
    /// Nesting so far (parentheses, lists, `!`): the parser recurses, so hostile input
    /// like ten thousand `(` must end in an error, not a stack overflow.
    var depth = 0
    static let maxDepth = 64

    /// The largest list index a path may name.
    static let maxIndex = 1_000_000

    init(source: String) { characters = Array(source) }

    mutating func parse() throws(ExpressionError) -> Expression.Node {
        try advance()
        guard token != .end else { throw ExpressionError(message: "empty condition", position: 1) }
        let node = try parseOr()
        guard token == .end else { throw failure("unexpected \(describe(token))") }
        return node
    }

    func failure(_ message: String) -> ExpressionError { ExpressionError(message: message, position: tokenStart + 1) }

    func describe(_ token: Token) -> String {
        switch token {
        case .number(let n): return "number \(n)"
        case .string(let s): return "string '\(s)'"
        case .identifier(let i): return "'\(i)'"
        case .symbol(let s): return "'\(s)'"
        case .end: return "end of condition"
        }
    }

    mutating func parseOr() throws(ExpressionError) -> Expression.Node {
        var left = try parseAnd()
        while token == .symbol("||") {
            try advance()
            left = .or(left, try parseAnd())
        }
        return left
    }

    mutating func parseAnd() throws(ExpressionError) -> Expression.Node {
        var left = try parseNot()
        while token == .symbol("&&") {
            try advance()
            left = .and(left, try parseNot())
        }
        return left
    }

    mutating func parseNot() throws(ExpressionError) -> Expression.Node {
        if token == .symbol("!") {
            try advance()
            try nest()
            defer { depth -= 1 }
            return .not(try parseNot())
        }
        return try parseComparison()
    }

    mutating func nest() throws(ExpressionError) {
        depth += 1
        guard depth <= Self.maxDepth else { throw failure("nested more than \(Self.maxDepth) levels deep") }
    }

    mutating func parseComparison() throws(ExpressionError) -> Expression.Node {
        let left = try parsePrimary()
        let op: Expression.Comparison?
        switch token {
        case .symbol(let s): op = Expression.Comparison(rawValue: s)
        case .identifier("in"): op = .contains
        case .number, .string, .identifier, .end: op = nil
        }
        guard let op else { return left }
        try advance()
        return .compare(op, left, try parsePrimary())
    }

    mutating func parsePrimary() throws(ExpressionError) -> Expression.Node {
        switch token {
        case .number(let n):
            try advance()
            return .literal(.number(n))
        case .string(let s):
            try advance()
            return .literal(.string(s))
        case .identifier("true"):
            try advance()
            return .literal(.bool(true))
        case .identifier("false"):
            try advance()
            return .literal(.bool(false))
        case .identifier("null"):
            try advance()
            return .literal(.null)
        case .identifier(let name):
            return try parsePath(first: name)
        case .symbol("("):
            try advance()
            try nest()
            defer { depth -= 1 }
            let inner = try parseOr()
            guard token == .symbol(")") else { throw failure("expected ')'") }
            try advance()
            return inner
        case .symbol("["):
            try advance()
            try nest()
            defer { depth -= 1 }
            var items: [Expression.Node] = []
            if token != .symbol("]") {
                while true {
                    items.append(try parsePrimary())
                    if token == .symbol(",") { try advance(); continue }
                    break
                }
            }
            guard token == .symbol("]") else { throw failure("expected ']'") }
            try advance()
            return .list(items)
        case .symbol, .end:
            throw failure("expected a value, found \(describe(token))")
        }
    }

    /// `context.data.a.b[2]`; a path not starting with `context` is inside context.data.
    mutating func parsePath(first: String) throws(ExpressionError) -> Expression.Node {
        var names: [Expression.PathComponent] = [.key(first)]
        try advance()
        while true {
            if token == .symbol(".") {
                try advance()
                guard case .identifier(let name) = token else { throw failure("expected a name after '.'") }
                names.append(.key(name))
                try advance()
            } else if token == .symbol("[") && index <= characters.count {
                try advance()
                switch token {
                case .number(let n) where n == n.rounded() && n >= 0:
                    // An index past any list a context can hold is refused, not converted:
                    // `Int(1e20)` would trap.
                    guard n <= Double(Self.maxIndex) else { throw failure("index \(describe(token)) is over \(Self.maxIndex)") }
                    names.append(.index(Int(n)))
                case .string(let s): names.append(.key(s))
                default: throw failure("expected an index or a quoted key in '[...]'")
                }
                try advance()
                guard token == .symbol("]") else { throw failure("expected ']'") }
                try advance()
            } else {
                break
            }
        }
        if names.count >= 2, names[0] == .key("context"), names[1] == .key("data") {
            return .path(Array(names.dropFirst(2)))
        }
        if names[0] == .key("context") {
            throw ExpressionError(message: "only context.data is readable in a condition", position: 1)
        }
        return .path(names)
    }

    mutating func advance() throws(ExpressionError) {
        while index < characters.count, characters[index].isWhitespace { index += 1 }
        tokenStart = index
        guard index < characters.count else { token = .end; return }
        let c = characters[index]
        if c.isNumber || (c == "-" && index + 1 < characters.count && characters[index + 1].isNumber && !previousIsValue) {
            var end = index + 1
            while end < characters.count, characters[end].isNumber || characters[end] == "." { end += 1 }
            guard let value = Double(String(characters[index..<end])) else { throw failure("malformed number") }
            index = end
            token = .number(value)
            return
        }
        if c == "'" || c == "\"" {
            var end = index + 1
            var text = ""
            while end < characters.count, characters[end] != c {
                if characters[end] == "\\", end + 1 < characters.count { end += 1 }
                text.append(characters[end])
                end += 1
            }
            guard end < characters.count else { throw failure("unterminated string") }
            index = end + 1
            token = .string(text)
            return
        }
        if c.isLetter || c == "_" {
            var end = index + 1
            while end < characters.count, characters[end].isLetter || characters[end].isNumber || characters[end] == "_" { end += 1 }
            token = .identifier(String(characters[index..<end]))
            index = end
            return
        }
        for symbol in ["==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "(", ")", "[", "]", ".", ","] {
            let s = Array(symbol)
            if index + s.count <= characters.count, Array(characters[index..<index + s.count]) == s {
                index += s.count
                token = .symbol(symbol)
                return
            }
        }
        if c == "=" { throw failure("use '==' to compare") }
        throw failure("unexpected character '\(c)'")
    }

    /// Whether the token just read ends a value (so a following '-' is not a sign).
    var previousIsValue: Bool {
        switch token {
        case .number, .string, .identifier: return true
        case .symbol(let s): return s == ")" || s == "]"
        case .end: return false
        }
    }
}
