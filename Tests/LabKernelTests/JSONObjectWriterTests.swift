import Testing
import LabKernel

@Suite("JSON object writer")
struct JSONObjectWriterTests {
    @Test("writes integers digit by digit, exact at both ends of the 64-bit range")
    func integers() throws {
        var writer = JSONObjectWriter()
        writer.member("zero", integer: 0)
        writer.member("negative", integer: -1_234)
        writer.member("min", exact: Int64.min)
        writer.member("max", exact: UInt64.max)
        writer.member("stamp", exact: Int64(1_779_000_000_123_456_789))
        writer.member("words", exactList: [0, 9, 10, 18_446_744_073_709_551_615])
        writer.member("none", exactList: [])
        let text = String(decoding: writer.finish(), as: UTF8.self)
        #expect(text == #"{"zero":0,"negative":-1234,"min":"-9223372036854775808","max":"18446744073709551615","#
            + #""stamp":"1779000000123456789","words":["0","9","10","18446744073709551615"],"none":[]}"#)
        let parsed = try JSONValue.parse(text)
        #expect(parsed["negative"] == -1_234)
        #expect(parsed["min"] == "-9223372036854775808")
    }

    @Test("a reused buffer starts a fresh object")
    func reuse() {
        var first = JSONObjectWriter()
        first.member("a", string: "x\"y")
        let bytes = first.finish()
        var second = JSONObjectWriter(reusing: bytes)
        second.member("b", integer: 7)
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"a":"x\"y"}"#)
        #expect(String(decoding: second.finish(), as: UTF8.self) == #"{"b":7}"#)
    }
}
