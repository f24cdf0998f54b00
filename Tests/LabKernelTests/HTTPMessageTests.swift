import LabKernel
import Testing

@Suite("HTTP messages")
struct HTTPMessageTests {
    @Test("a response header is found by its name in any case, and only by that name")
    func headerByName() {
        let response = HTTPResponseMessage(status: 200, headers: [HTTPHeader("Content-Type", "application/json"), HTTPHeader("Keep-Alive", "timeout=5"),
                                                                  HTTPHeader("X-@", "at")])
        #expect(response.header("content-type") == "application/json")
        #expect(response.header("CONTENT-TYPE") == "application/json")
        #expect(response.header("keep-alive") == "timeout=5")
        #expect(response.header("content-typ") == nil && response.header("content-typf") == nil)
        // Bytes 0x20 apart that are not letters are different characters.
        #expect(response.header("x-`") == nil && response.header("X-@") == "at")
        #expect(response.header("connection") == nil)
    }
}
