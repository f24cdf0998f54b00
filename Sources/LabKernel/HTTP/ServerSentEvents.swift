/// Server-Sent Events (the WHATWG `text/event-stream` format): what the AI bridge's relay
/// streams and the sync server's push channel sends, written and read by one codec.
public enum ServerSentEvents {
    /// One event: its name (`event:`) and data (`data:` lines joined by newlines).
    public struct Event: Sendable, Equatable {
        public var name: String
        public var data: String

        public init(_ name: String, _ data: String) {
            self.name = name
            self.data = data
        }
    }

    /// An event's bytes: `event:` then one `data:` line per line of `data`, then a blank line.
    public static func encode(_ event: Event) -> [UInt8] {
        var text = "event: \(event.name)\n"
        for line in event.data.split(separator: "\n", omittingEmptySubsequences: false) { text += "data: \(line)\n" }
        return Array((text + "\n").utf8)
    }

    /// Reads a stream as its bytes arrive, in any pieces: complete events come out of
    /// `feed`; a partial line waits for the rest. Comments (`:`) and unknown fields are
    /// skipped; an event without `event:` is named `message`. A line longer than
    /// `maxLine` bytes is an error (a stream that never ends a line cannot grow memory).
    public struct Parser: Sendable {
        var pending: [UInt8] = []
        var name = ""
        var data: [String] = []
        public let maxLine: Int

        public init(maxLine: Int = 1 << 20) { self.maxLine = maxLine }

        public struct LineTooLong: Error, Equatable {}

        public mutating func feed(_ bytes: some Collection<UInt8>) throws(LineTooLong) -> [Event] {
            pending += bytes
            var events: [Event] = []
            var start = 0
            while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                var end = newline
                if end > start && pending[end - 1] == UInt8(ascii: "\r") { end -= 1 }
                let line = String(decoding: pending[start..<end], as: UTF8.self)
                start = newline + 1
                if line.isEmpty {
                    if !data.isEmpty || !name.isEmpty { events.append(Event(name.isEmpty ? "message" : name, data.joined(separator: "\n"))) }
                    name = ""
                    data = []
                } else if line.hasPrefix("event:") {
                    name = Self.value(line.dropFirst(6))
                } else if line.hasPrefix("data:") {
                    data.append(Self.value(line.dropFirst(5)))
                }
            }
            pending.removeFirst(start)
            guard pending.count <= maxLine else { throw LineTooLong() }
            return events
        }

        /// A field's value: one leading space dropped, as the format says.
        static func value(_ text: Substring) -> String { String(text.first == " " ? text.dropFirst() : text) }
    }
}
