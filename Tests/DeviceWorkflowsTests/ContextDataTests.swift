import Testing
import LabKernel
@testable import DeviceWorkflows
@testable import Orch8Wire

@Suite("Context data")
struct ContextDataTests {
    /// Applies a run of changes to a context and to a plain dictionary side by side.
    static func changes(count: Int) -> [(String, JSONValue?)] {
        (0..<count).map { i in
            let key = "k\(i % 5)"
            return (key, i % 7 == 6 ? nil : .number(Double(i)))
        }
    }

    /// The context as the device store writes it: members into an object writer.
    static func written(_ context: ContextData) -> [UInt8] {
        var writer = JSONObjectWriter()
        context.writeMembers(into: &writer)
        return writer.finish()
    }

    @Test("reads, overwrites and removals agree with a dictionary, before and after folding", arguments: [0, 3, 8, 9, 30])
    func agreesWithDictionary(count: Int) throws {
        var context: ContextData = ["seed": "x", "k1": true]
        var expected: [String: JSONValue] = ["seed": "x", "k1": true]
        for (key, value) in Self.changes(count: count) {
            context[key] = value
            expected[key] = value
            #expect(context[key] == value)
        }
        #expect(context.dictionary == expected)
        #expect(context.count == expected.count)
        #expect(Dictionary(uniqueKeysWithValues: Array(context)) == expected)
        for key in ["seed", "k0", "k1", "k2", "k3", "k4", "absent"] { #expect(context[key] == expected[key], "\(key)") }
        // The JSON written without merging first is the same object.
        #expect(try JSONValue.parse(bytes: Self.written(context)) == .object(expected))
    }

    @Test("a snapshot does not see later changes, and the changes do not see the snapshot's")
    func versionsAreIndependent() {
        var live: ContextData = ["a": 1]
        for i in 0..<6 { live["n\(i)"] = .number(Double(i)) }
        let snapshot = live
        for i in 0..<20 { live["n\(i % 4)"] = .string("changed \(i)") }
        live["a"] = nil
        #expect(snapshot["a"] == 1 && snapshot["n0"] == 0 && snapshot["n5"] == 5 && snapshot.count == 7)
        #expect(live["a"] == nil && live["n0"] == "changed 16" && live["n5"] == 5 && live.count == 6)
        var branch = snapshot
        branch["a"] = "branch"
        #expect(snapshot["a"] == 1 && branch["a"] == "branch" && live["a"] == nil)
    }

    @Test("an empty context writes an empty object, and equality compares contents")
    func emptyAndEquality() throws {
        var context = ContextData()
        #expect(String(decoding: Self.written(context), as: UTF8.self) == "{}")
        context["gone"] = "soon"
        context["gone"] = nil
        #expect(String(decoding: Self.written(context), as: UTF8.self) == "{}")
        #expect(context == ContextData() && context.isEmpty)
        #expect(ContextData(["a": 1, "b": 2]) == ["b": 2, "a": 1])
    }
}
