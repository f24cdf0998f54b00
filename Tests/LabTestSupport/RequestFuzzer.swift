public import LabKernel

/// Hostile requests for a server core, from one seed: a route table's templates filled
/// with known ids or junk, valid bodies mutated (fields dropped, retyped, set to numbers
/// and dates at the edges of every integer type, truncated, replaced by random bytes),
/// and queries with edge values. Each server's fuzz suite lists its routes and asserts
/// that every answer is a 2xx or 4xx; a trap ends the test process, which fails the run.
///
/// `FLEETLAB_FUZZ_REQUESTS` (default: the suite's count) and `FLEETLAB_FUZZ_SEED` run it
/// longer or elsewhere: `FLEETLAB_FUZZ_REQUESTS=200000 swift test --filter Fuzz`.
public struct RequestFuzzer {
    /// One route: method, a path template with `{name}` holes, a valid body, and the
    /// query keys it reads.
    public struct Route: Sendable {
        public var method: String
        public var template: String
        public var body: JSONValue?
        public var query: [String]

        public init(_ method: String, _ template: String, _ body: JSONValue? = nil, query: [String] = []) {
            self.method = method
            self.template = template
            self.body = body
            self.query = query
        }
    }

    public var generator: SeededGenerator
    public let seed: UInt64
    /// Known values for each `{hole}`: mostly these are used, sometimes junk.
    public var holes: [String: [String]] = [:]

    public init(defaultSeed: UInt64 = 0xF022) {
        let text = Environment.value("FLEETLAB_FUZZ_SEED")
        seed = text.flatMap { UInt64($0) } ?? defaultSeed
        generator = SeededGenerator(seed: seed)
    }

    /// How many requests a suite sends: its own default, or `FLEETLAB_FUZZ_REQUESTS`.
    public static func count(default value: Int) -> Int {
        Environment.value("FLEETLAB_FUZZ_REQUESTS").flatMap { Int($0) } ?? value
    }

    /// What to say when a request fails the suite: the seed and the command that replays it.
    public func replay(_ index: Int) -> String {
        "request \(index) of seed \(seed); replay: FLEETLAB_FUZZ_SEED=\(seed) swift test --filter Fuzz"
    }

    public mutating func pick<T>(_ items: [T]) -> T { items[Int(generator.next(below: UInt64(items.count)))] }

    public mutating func percent(_ p: UInt64) -> Bool { generator.next(below: 100) < p }

    // MARK: Values at the edges

    public static let numbers: [Double] = [0, -0.0, 1, -1, 0.5, -0.5, 1e-300, 2, 59, 60, 100, 101, 127, 128, 255, 256, 500, 501, 65_535, 65_536,
                                    2_147_483_647, 2_147_483_648, 4_294_967_295, 4_294_967_296, 9_007_199_254_740_993,
                                    99_999_999_999_999_999_999, 999_999_999_999_999, 1e15, 9.22e18, -9.22e18, 9.3e18, -9.3e18,
                                    1e19, 1e20, 1e300, -1e300, 1.7976931348623157e308]

    public static let strings: [String] = ["", " ", "a", "0", "-1", "null", "true", "9999-01-01T00:00:00Z", "0001-01-01T00:00:00Z",
                                    "2026-02-30T25:61:61Z", "2026-01-01T00:00:00+99:99", "1970-01-01T00:00:00.000000000001Z",
                                    "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff", "not-a-uuid",
                                    "../../etc/passwd", "%00", "%ff%fe", "\u{0}", "\u{202E}evil", "👩‍👩‍👧‍👦", "credentials://x/y",
                                    "credentials://", "x[99999999999999999999] == 1", "((((((((((((((((", "!!!!!!!!!!!!!!!!!!!!", "a.b.c[0]",
                                    "' OR 1=1 --", "<script>alert(1)</script>", "base64===", "AAAA", String(repeating: "A", count: 44),
                                    String(repeating: "x", count: 70_000)]

    /// What a run of digits inside a string becomes: `x[2]` → `x[99999999999999999999]`.
    static let digitEdges = ["99999999999999999999", "9223372036854775808", "-1", "0", "4294967296", "1e400", "99999"]

    /// A random JSON value, at most `depth` levels deep.
    public mutating func value(depth: Int = 3) -> JSONValue {
        switch generator.next(below: depth > 0 ? 7 : 4) {
        case 0: return .null
        case 1: return .bool(percent(50))
        case 2: return .number(percent(70) ? pick(Self.numbers) : Double(Int64(bitPattern: generator.next()) >> generator.next(below: 64)))
        case 3: return .string(percent(80) ? pick(Self.strings) : String(decoding: generator.bytes(Int(generator.next(below: 40))), as: UTF8.self))
        case 4, 5:
            return .array((0..<generator.next(below: 4)).map { _ in value(depth: depth - 1) })
        default:
            var fields: [String: JSONValue] = [:]
            for _ in 0..<generator.next(below: 4) { fields[pick(Self.strings.prefix(8).map { $0 }) + "k"] = value(depth: depth - 1) }
            return .object(fields)
        }
    }

    /// `body` with one to three changes, each at a node picked uniformly from the whole
    /// tree, so a leaf five levels down (a block's `timeout`) is hit as often as a
    /// top-level field: a value replaced by an edge value of its own kind or any value,
    /// removed, repeated, or given a sibling.
    public mutating func mutate(_ body: JSONValue) -> JSONValue {
        var out = body
        for _ in 0...generator.next(below: 3) {
            var paths: [[PathStep]] = []
            Self.collect(out, at: [], into: &paths)
            out = Self.rewrite(out, at: pick(paths)[...]) { node in self.mutateNode(node) }
        }
        return out
    }

    public enum PathStep: Sendable { case key(String), index(Int) }

    static func collect(_ json: JSONValue, at path: [PathStep], into paths: inout [[PathStep]]) {
        paths.append(path)
        switch json {
        case .object(let fields): for key in fields.keys.sorted() { collect(fields[key]!, at: path + [.key(key)], into: &paths) }
        case .array(let items): for index in items.indices { collect(items[index], at: path + [.index(index)], into: &paths) }
        case .null, .bool, .number, .string: break
        }
    }

    /// `json` with the node at `path` replaced by `change(node)` (nil removes it).
    static func rewrite(_ json: JSONValue, at path: ArraySlice<PathStep>, _ change: (JSONValue) -> JSONValue?) -> JSONValue {
        guard let step = path.first else { return change(json) ?? .null }
        let rest = path.dropFirst()
        switch (step, json) {
        case (.key(let key), .object(var fields)):
            guard let child = fields[key] else { return json }
            fields[key] = rest.isEmpty ? change(child) : rewrite(child, at: rest, change)
            return .object(fields)
        case (.index(let index), .array(var items)) where items.indices.contains(index):
            if rest.isEmpty, let changed = change(items[index]) { items[index] = changed } else if rest.isEmpty { items.remove(at: index) } else {
                items[index] = rewrite(items[index], at: rest, change)
            }
            return .array(items)
        default:
            return json
        }
    }

    mutating func mutateNode(_ node: JSONValue) -> JSONValue? {
        switch generator.next(below: 20) {
        case 0..<10:
            switch node {
            case .number: return .number(pick(Self.numbers))
            case .string(let text) where percent(50): return .string(mutateText(text))
            case .string: return .string(pick(Self.strings))
            case .array(let items) where !items.isEmpty && percent(50):
                return .array(Array(repeating: items[0], count: Int(generator.next(below: 700))))
            default: return value()
            }
        case 10..<14: return value()
        case 14..<17: return nil
        default:
            guard case .object(var fields) = node else { return value() }
            fields[pick(Self.strings.prefix(10).map { $0 }) + "_added"] = value()
            return .object(fields)
        }
    }

    /// A string with a run of digits swapped for an edge number (`x[2]` → `x[99999999999999999999]`,
    /// a date's year → 99999), or with an edge string spliced in, or cut short.
    mutating func mutateText(_ text: String) -> String {
        var characters = Array(text)
        if let start = characters.firstIndex(where: \.isNumber), percent(70) {
            var end = start
            while end < characters.count, characters[end].isNumber { end += 1 }
            characters.replaceSubrange(start..<end, with: pick(Self.digitEdges))
            return String(characters)
        }
        if percent(50) {
            let at = Int(generator.next(below: UInt64(characters.count + 1)))
            characters.insert(contentsOf: pick(Self.strings.filter { $0.utf8.count < 100 }), at: at)
            return String(characters)
        }
        return String(characters.prefix(Int(generator.next(below: UInt64(characters.count + 1)))))
    }

    /// The bytes of a request body: usually the (mutated) JSON, sometimes broken text.
    public mutating func bodyBytes(for route: Route) -> [UInt8] {
        let roll = generator.next(below: 100)
        let json = route.body.map { roll < 15 ? $0 : mutate($0) } ?? value()
        var bytes: [UInt8] = []
        json.write(to: &bytes)
        switch roll {
        case 90..<94: return Array(bytes.prefix(Int(generator.next(below: UInt64(bytes.count + 1)))))
        case 94..<97: return generator.bytes(Int(generator.next(below: 200)))
        case 97..<99: return []
        case 99: return Array(repeating: UInt8(ascii: "["), count: 600) + Array(repeating: UInt8(ascii: "]"), count: 600)
        default: return bytes
        }
    }

    /// A path from a template, its holes filled with known values (usually) or junk.
    public mutating func path(_ template: String) -> String {
        var out = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            out += rest[..<open]
            let name = String(rest[rest.index(after: open)..<close])
            let known = holes[name] ?? []
            if !known.isEmpty && percent(85) {
                out += pick(known)
            } else {
                out += PercentEncoding.encode(pick(Self.strings.filter { $0.utf8.count < 200 }))
            }
            rest = rest[rest.index(after: close)...]
        }
        return out + rest
    }

    /// A query string for the route's keys (and sometimes others), edge values included.
    public mutating func query(_ route: Route) -> String {
        var pairs: [String] = []
        for key in route.query where percent(60) {
            let value: String
            if percent(50), let known = holes[key], !known.isEmpty { value = pick(known) } else if percent(50) {
                value = pick(Self.numbers).description
            } else {
                value = pick(Self.strings.filter { $0.utf8.count < 200 })
            }
            pairs.append("\(key)=\(PercentEncoding.encode(value))")
        }
        if percent(5) { pairs.append("\(pick(Self.strings.prefix(6).map { $0 }))=\(PercentEncoding.encode(pick(Self.strings.prefix(12).map { $0 })))") }
        return pairs.isEmpty ? "" : "?" + pairs.joined(separator: "&")
    }

    /// What a run of requests found: how many were sent, and each answered outside
    /// 2xx–4xx, described with how to replay it.
    public struct Outcome: Sendable {
        public var sent = 0
        public var failures: [String] = []
    }

    /// Every single-field change of every route's body, systematically: each node, in
    /// turn, set to every edge value of its kind (numbers to every edge number, strings
    /// to every edge string and their digit-swapped forms), to null, and removed. What
    /// random mutation reaches by luck (a block's `timeout` five levels down set to
    /// 999999999999999) this reaches every run. `reset` builds a fresh server state
    /// before each field (it fills `holes` and returns the headers to send); paths and
    /// queries use the first known value of each hole.
    public mutating func sweep(_ routes: [Route], reset: (inout RequestFuzzer) throws -> [String: String],
                               send: (HTTPRequestMessage) -> HTTPResponseMessage) rethrows -> Outcome {
        var outcome = Outcome()
        for route in routes {
            guard let body = route.body else { continue }
            var paths: [[PathStep]] = []
            Self.collect(body, at: [], into: &paths)
            for at in paths.dropFirst() {
                var headers = try reset(&self)
                headers["content-type"] = "application/json"
                let path = String(self.pathOfKnown(route.template))
                for replacement in Self.replacements(for: Self.node(body, at: at[...])) {
                    var bytes: [UInt8] = []
                    Self.rewrite(body, at: at[...]) { _ in replacement }.write(to: &bytes)
                    let request = HTTPRequestMessage(method: route.method, target: path, headers: headers, body: bytes)
                    outcome.sent += 1
                    let response = send(request)
                    if !(200..<500).contains(response.status) {
                        outcome.failures.append("\(route.method) \(path) \(String(decoding: bytes.prefix(300), as: UTF8.self)) → \(response.status) "
                            + String(decoding: response.body.prefix(200), as: UTF8.self))
                    }
                }
            }
        }
        return outcome
    }

    /// `count` random requests (`request(from:headers:)`); `reset` every `resetEvery`.
    public mutating func random(_ routes: [Route], count: Int, resetEvery: Int, reset: (inout RequestFuzzer) throws -> Void,
                                headers: (inout RequestFuzzer) -> [String: String],
                                send: (HTTPRequestMessage) -> HTTPResponseMessage) rethrows -> Outcome {
        var outcome = Outcome()
        try reset(&self)
        for index in 0..<count {
            if index % resetEvery == resetEvery - 1 { try reset(&self) }
            let request = self.request(from: routes, headers: headers(&self))
            outcome.sent += 1
            let response = send(request)
            if !(200..<500).contains(response.status) {
                outcome.failures.append("\(request.method) \(request.path) → \(response.status) \(String(decoding: response.body.prefix(200), as: UTF8.self)); "
                    + replay(index))
            }
        }
        return outcome
    }

    /// A template with each hole filled by its first known value.
    func pathOfKnown(_ template: String) -> String {
        var out = template
        for (name, values) in holes { if let first = values.first { out = out.split(separator: "{\(name)}", omittingEmptySubsequences: false).joined(separator: first) } }
        return out
    }

    /// The edge values a node is set to in a sweep (nil: removed).
    static func replacements(for node: JSONValue?) -> [JSONValue?] {
        var out: [JSONValue?] = [nil, .null, .bool(true), .array([]), .object([:])]
        out += numbers.map { .number($0) }
        out += strings.map { .string($0) }
        if case .string(let text)? = node, let start = text.firstIndex(where: \.isNumber) {
            let end = text[start...].firstIndex { !$0.isNumber } ?? text.endIndex
            for edge in digitEdges { out.append(.string(String(text[..<start]) + edge + String(text[end...]))) }
        }
        return out
    }

    static func node(_ json: JSONValue, at path: ArraySlice<PathStep>) -> JSONValue? {
        guard let step = path.first else { return json }
        switch (step, json) {
        case (.key(let key), .object(let fields)): return fields[key].flatMap { node($0, at: path.dropFirst()) }
        case (.index(let index), .array(let items)) where items.indices.contains(index): return node(items[index], at: path.dropFirst())
        default: return nil
        }
    }

    /// One request for a route from the table (or, rarely, a random method and path).
    public mutating func request(from routes: [Route], headers: [String: String]) -> HTTPRequestMessage {
        let route = pick(routes)
        var method = route.method
        if percent(3) { method = pick(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "BREW"]) }
        var all = headers
        all["content-type"] = "application/json"
        return HTTPRequestMessage(method: method, target: path(route.template) + query(route), headers: all, body: bodyBytes(for: route))
    }
}

/// Reads the environment without Foundation (LabTestSupport's callers may not import it).
enum Environment {
    static func value(_ name: String) -> String? {
        guard let pointer = getenv(name) else { return nil }
        return String(cString: pointer)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
