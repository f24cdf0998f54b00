/// Writes one JSON object member by member into a byte buffer, without building a
/// dictionary first: for records written on a hot path (a device store writes one per
/// changed workflow instance per tick). Members come out in the order they are written.
public struct JSONObjectWriter {
    public private(set) var bytes: [UInt8]
    var empty = true

    /// Starts an object in `buffer`, whose old contents are dropped and capacity kept.
    public init(reusing buffer: [UInt8] = []) {
        bytes = buffer
        bytes.removeAll(keepingCapacity: true)
        bytes.append(0x7B)
    }

    mutating func key(_ name: String) {
        if !empty { bytes.append(0x2C) }
        empty = false
        JSONValue.writeString(name, to: &bytes)
        bytes.append(0x3A)
    }

    public mutating func member(_ name: String, _ value: JSONValue) {
        key(name)
        value.write(to: &bytes, sortedKeys: false)
    }

    public mutating func member(_ name: String, string: String) {
        key(name)
        JSONValue.writeString(string, to: &bytes)
    }

    /// An integer written as a JSON number (exact up to 2^53).
    public mutating func member(_ name: String, integer: Int) {
        key(name)
        bytes.append(contentsOf: String(integer).utf8)
    }

    /// A 64-bit integer written as a decimal string, which survives any JSON reader.
    public mutating func member<T: BinaryInteger>(_ name: String, exact: T) {
        key(name)
        appendQuoted(exact)
    }

    /// A list of 64-bit integers, each a decimal string.
    public mutating func member<T: BinaryInteger>(_ name: String, exactList: some Sequence<T>) {
        key(name)
        bytes.append(0x5B)
        for (index, value) in exactList.enumerated() {
            if index > 0 { bytes.append(0x2C) }
            appendQuoted(value)
        }
        bytes.append(0x5D)
    }

    mutating func appendQuoted<T: BinaryInteger>(_ value: T) {
        bytes.append(0x22)
        bytes.append(contentsOf: String(value).utf8)
        bytes.append(0x22)
    }

    /// Closes the object and hands back its bytes.
    public mutating func finish() -> [UInt8] {
        bytes.append(0x7D)
        return bytes
    }
}
