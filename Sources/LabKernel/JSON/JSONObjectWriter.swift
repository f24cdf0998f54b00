/// Writes one JSON object member by member into a byte buffer, without building a
/// dictionary first: for records written on a hot path (a device store writes one per
/// changed workflow instance per tick). Members come out in the order they are written.
public struct JSONObjectWriter {
    public private(set) var bytes: [UInt8]
    var empty = true

    /// Starts an object in a copy of `buffer` (its old contents dropped).
    public init(reusing buffer: [UInt8] = []) {
        var copy = buffer
        self.init(taking: &copy)
    }

    /// Starts an object in `buffer`, moved in and left empty, so its capacity is reused
    /// (a copy would still be shared with the caller's variable and reallocate); the
    /// caller gets it back from `finish()`.
    public init(taking buffer: inout [UInt8]) {
        bytes = []
        swap(&bytes, &buffer)
        bytes.removeAll(keepingCapacity: true)
        bytes.append(0x7B)
    }

    mutating func separator() {
        if !empty { bytes.append(0x2C) }
        empty = false
    }

    /// Member names are literals the writer's callers spell out, plain ASCII that needs
    /// no escaping: they are copied as they are.
    mutating func key(_ name: StaticString) {
        separator()
        bytes.append(0x22)
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        bytes.append(0x22)
        bytes.append(0x3A)
    }

    public mutating func member(_ name: StaticString, _ value: JSONValue) {
        key(name)
        value.write(to: &bytes, sortedKeys: false)
    }

    /// A member whose name is data (escaped as a JSON string), not a literal.
    public mutating func member(escaping name: String, _ value: JSONValue) {
        separator()
        JSONValue.writeString(name, to: &bytes)
        bytes.append(0x3A)
        value.write(to: &bytes, sortedKeys: false)
    }

    public mutating func member(_ name: StaticString, string: String) {
        key(name)
        JSONValue.writeString(string, to: &bytes)
    }

    /// A string, or `null`.
    public mutating func member(_ name: StaticString, optionalString string: String?) {
        key(name)
        if let string { JSONValue.writeString(string, to: &bytes) } else { bytes.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C]) }
    }

    /// A value written elsewhere (an object or array already in JSON).
    public mutating func member(_ name: StaticString, json: [UInt8]) {
        key(name)
        bytes.append(contentsOf: json)
    }

    public mutating func member(_ name: StaticString, bool: Bool) {
        key(name)
        bytes.append(contentsOf: bool ? [0x74, 0x72, 0x75, 0x65] : [0x66, 0x61, 0x6C, 0x73, 0x65])
    }

    /// An integer written as a JSON number (exact up to 2^53).
    public mutating func member(_ name: StaticString, integer: Int) {
        key(name)
        appendDecimal(Int64(integer))
    }

    /// A 64-bit integer written as a decimal string, which survives any JSON reader.
    public mutating func member(_ name: StaticString, exact: Int64) {
        key(name)
        appendQuoted(exact)
    }

    public mutating func member(_ name: StaticString, exact: UInt64) {
        key(name)
        appendQuoted(exact)
    }

    /// A list of 64-bit integers, each a decimal string.
    public mutating func member(_ name: StaticString, exactList: [UInt64]) {
        key(name)
        bytes.append(0x5B)
        for index in exactList.indices {
            if index > 0 { bytes.append(0x2C) }
            appendQuoted(exactList[index])
        }
        bytes.append(0x5D)
    }

    mutating func appendQuoted(_ value: Int64) {
        bytes.append(0x22)
        appendDecimal(value)
        bytes.append(0x22)
    }

    mutating func appendQuoted(_ value: UInt64) {
        bytes.append(0x22)
        appendDecimal(value)
        bytes.append(0x22)
    }

    // Digits straight into the buffer: `String(value)` allocates for anything over 15
    // digits (every nanosecond stamp and generator word), and its generic form is slow.
    mutating func appendDecimal(_ value: Int64) {
        if value < 0 { bytes.append(0x2D) }
        appendDecimal(value.magnitude)
    }

    mutating func appendDecimal(_ value: UInt64) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var rest = value
            var start = 20
            repeat {
                start -= 1
                digits[start] = 0x30 + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }

    /// Closes the object and hands back its bytes.
    public mutating func finish() -> [UInt8] {
        bytes.append(0x7D)
        return bytes
    }
}
