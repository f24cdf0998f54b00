import Testing
import LabKernel
@testable import Simulator

/// The socket model every stack with sockets shares: frames in order, and what a socket
/// carried lost with it.
@Suite("Device links")
struct DeviceLinksTests {
    @Test("a socket's frames arrive in the order sent, even when a later one's hop is quicker; a new socket starts a fresh order")
    func order() {
        var links = DeviceLinks(label: "test-link")
        let start = Instant.zero
        #expect(links.socketArrival(1, latency: .milliseconds(100), now: start) == start + .milliseconds(100))
        #expect(links.socketArrival(1, latency: .milliseconds(10), now: start + .milliseconds(1)) == start + .milliseconds(100))
        #expect(links.socketArrival(2, latency: .milliseconds(10), now: start + .milliseconds(1)) == start + .milliseconds(11), "another device's socket")
        links.socketGone(1)
        #expect(links.socketArrival(1, latency: .milliseconds(10), now: start + .milliseconds(2)) == start + .milliseconds(12))
    }

    @Test("what was on its way over a socket that has gone is lost: after the client closes it, loses its network, or hears the server's close")
    func lostWithItsSocket() {
        var links = DeviceLinks(label: "test-link")
        func arrives(_ device: Int, _ socket: UInt32, closing: Bool = false) -> Bool { links.arrive(device, socket: socket, closing: closing) }
        let first = links.socket(1)
        #expect(arrives(1, first), "a frame over the open socket")
        links.socketGone(1)
        #expect(!arrives(1, first), "a frame, or the opening, of the socket the client lost")
        let second = links.socket(1)
        #expect(second != first)
        #expect(arrives(1, second, closing: true), "the server's close, after the frames before it")
        #expect(!arrives(1, second), "nothing arrives over a socket after its close")
        #expect(!arrives(1, second, closing: true), "nor a second close")
        #expect(arrives(2, links.socket(2)), "another device's socket is its own")
    }
}
