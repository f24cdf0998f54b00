import Testing
import LabKernel

@Suite("JSON parsing")
struct JSONParsingTests {
    @Test("parses every value kind and round-trips through canonical text")
    func roundTrip() throws {
        let text = #"{"b": [1, -2.5e3, true, false, null], "a": "é \" \\ \n \u00e9 \ud83d\ude00", "c": {"d": {}}, "e": []}"#
        let value = try JSONValue.parse(text)
        #expect(value["a"] == .string("é \" \\ \n é 😀"))
        #expect(value["b"] == [1, -2500, true, false, nil])
        #expect(try JSONValue.parse(value.canonicalText) == value)
    }

    @Test("every escape decodes, between runs of plain text of any length, and the text re-escapes to the same value")
    func escapes() throws {
        let plain = String(repeating: "envelope ", count: 40)
        let text = #"["\b\f\n\r\t\/\"\\", "x\u0001y", ""# + plain + #"\"to\": \"é\" "# + plain + #"\u00e9\ud83d\ude00"]"#
        let value = try JSONValue.parse(text)
        #expect(value == [.string("\u{08}\u{0C}\n\r\t/\"\\"), .string("x\u{01}y"), .string(plain + "\"to\": \"é\" " + plain + "é😀")])
        #expect(try JSONValue.parse(value.canonicalText) == value)
    }

    @Test("errors give the line and column", arguments: [
        ("{\"a\": 1,}", "expected a quoted key", 1, 9),
        ("[1, 2", "unexpected end of input in a list", 1, 6),
        ("{\n  \"a\": tru\n}", "expected true", 2, 8),
        ("\"abc", "unterminated string", 1, 5),
        ("01", "unexpected text after the JSON value", 1, 2),
        ("{} x", "unexpected text after the JSON value", 1, 4),
        ("\"\\ud800\"", "unpaired surrogate in a string", 1, 8),
        ("", "unexpected end of input", 1, 1),
    ])
    func errors(text: String, message: String, line: Int, column: Int) {
        do {
            _ = try JSONValue.parse(text)
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.message == message)
            #expect(error.line == line && error.column == column, "\(error)")
        }
    }

    @Test("deep nesting is refused, not a stack overflow")
    func depth() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deep) }
    }
}
