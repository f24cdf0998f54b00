public import LabKernel

/// A message as the app shows it.
///
/// A phone keeps every message of its day (a fleet's phones hold tens of millions), so
/// the record is kept compact: the server's ids are UUIDs and its times are RFC 3339 with
/// milliseconds, and each is held as the 16 or 8 bytes it encodes instead of a heap string
/// of 36 or 24 characters (`ChatID`, `ChatTime`). Ids and times in any other form are kept
/// as the text they came as. Where it came from (channel, sender, device) is one shared
/// `MessageOrigin`: a phone's messages come from a few dozen of them. The fields read as
/// the strings the server sent.
public struct ChatClientMessage: Sendable, Equatable {
    // In this order, the flags fill the id's padding: 72 bytes a message, not 80.
    public let compactID: ChatID
    public var edited: Bool
    public var deleted: Bool
    let origin: MessageOrigin
    /// When the server stored it: the timeline's order (then the id).
    public let compactCreatedAt: ChatTime
    public var text: String

    public init(id: String, channelID: String, senderID: String, senderDeviceID: String?, text: String, createdAt: String, edited: Bool, deleted: Bool) {
        self.init(id: ChatID(id), origin: MessageOrigin(channelID: ChatID(channelID), senderID: ChatID(senderID), senderDeviceID: senderDeviceID.map { ChatID($0) }),
                  text: text, createdAt: ChatTime(createdAt), edited: edited, deleted: deleted)
    }

    init(id: ChatID, origin: MessageOrigin, text: String, createdAt: ChatTime, edited: Bool, deleted: Bool) {
        compactID = id
        self.origin = origin
        compactCreatedAt = createdAt
        self.text = text
        self.edited = edited
        self.deleted = deleted
    }

    public var compactChannelID: ChatID { origin.channelID }
    public var compactSenderID: ChatID { origin.senderID }
    public var compactSenderDeviceID: ChatID? { origin.senderDeviceID }
    public var id: String { compactID.text }
    public var channelID: String { compactChannelID.text }
    public var senderID: String { compactSenderID.text }
    public var senderDeviceID: String? { compactSenderDeviceID?.text }
    public var createdAt: String { compactCreatedAt.text }
}

/// Where a message came from: its channel, its sender and the sender's device. Immutable,
/// so messages share one (`ChatClient.origin(in:…)`); two are equal when their ids are.
final class MessageOrigin: Sendable, Equatable {
    let channelID: ChatID
    let senderID: ChatID
    let senderDeviceID: ChatID?

    init(channelID: ChatID, senderID: ChatID, senderDeviceID: ChatID?) {
        self.channelID = channelID
        self.senderID = senderID
        self.senderDeviceID = senderDeviceID
    }

    static func == (a: MessageOrigin, b: MessageOrigin) -> Bool {
        a === b || (a.channelID == b.channelID && a.senderID == b.senderID && a.senderDeviceID == b.senderDeviceID)
    }

}

extension ChatClientMessage: Codable {
    enum CodingKeys: String, CodingKey {
        case id, channelID, senderID, senderDeviceID, text, createdAt, edited, deleted
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(id: try c.decode(String.self, forKey: .id), channelID: try c.decode(String.self, forKey: .channelID),
                  senderID: try c.decode(String.self, forKey: .senderID), senderDeviceID: try c.decodeIfPresent(String.self, forKey: .senderDeviceID),
                  text: try c.decode(String.self, forKey: .text), createdAt: try c.decode(String.self, forKey: .createdAt),
                  edited: try c.decode(Bool.self, forKey: .edited), deleted: try c.decode(Bool.self, forKey: .deleted))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(channelID, forKey: .channelID)
        try c.encode(senderID, forKey: .senderID)
        try c.encodeIfPresent(senderDeviceID, forKey: .senderDeviceID)
        try c.encode(text, forKey: .text)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(edited, forKey: .edited)
        try c.encode(deleted, forKey: .deleted)
    }
}

/// An id the chat server gave out: a lowercase hyphenated UUID as its 16 bytes, anything
/// else as its text. `text` gives back exactly what was read; the order is the text's.
public enum ChatID: Hashable, Comparable, Sendable {
    case uuid(UUIDValue)
    case other(String)

    public init(_ text: String) {
        // Only the lowercase form, so that `text` writes back the same characters.
        if let value = UUIDValue(text), !text.utf8.contains(where: { (UInt8(ascii: "A")...UInt8(ascii: "F")).contains($0) }) {
            self = .uuid(value)
        } else {
            self = .other(text)
        }
    }

    public var text: String {
        switch self {
        case .uuid(let value): return value.text
        case .other(let text): return text
        }
    }

    /// The order of the texts (two UUIDs compare as their lowercase hex does).
    public static func < (a: ChatID, b: ChatID) -> Bool {
        switch (a, b) {
        case (.uuid(let x), .uuid(let y)): return x < y
        case (.uuid, .other), (.other, .uuid), (.other, .other): return a.text < b.text
        }
    }
}

extension ChatID: ExpressibleByStringLiteral, CustomStringConvertible {
    public init(stringLiteral text: String) { self.init(text) }

    /// The text, so that a message naming an id reads as the server wrote it.
    public var description: String { text }
}

/// A value a snapshot stores as a text: as a value and as a dictionary key, so what is
/// held compactly reads and writes as the texts it was made from.
public protocol StoredAsText: Codable, CodingKeyRepresentable {
    /// Nil for a text that is not one.
    init?(_ text: String)
    var text: String { get }
}

extension StoredAsText {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let value = Self(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a \(Self.self): '\(text)'"))
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(text)
    }

    public var codingKey: any CodingKey { TextKey(stringValue: text) }

    public init?<T: CodingKey>(codingKey: T) { self.init(codingKey.stringValue) }
}

/// A dictionary key written as a text.
struct TextKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension ChatID: StoredAsText {}

/// When the server stored a message: its RFC 3339 text with milliseconds (as the servers
/// here write it) as milliseconds since the Unix epoch, any other form as its text. `text`
/// gives back exactly what was read; the order is the text's.
public enum ChatTime: Hashable, Comparable, Sendable {
    case milliseconds(Int64)
    case other(String)

    public init(_ text: String) {
        if let ms = RFC3339.parse(text), RFC3339.format(unixMilliseconds: ms) == text {
            self = .milliseconds(ms)
        } else {
            self = .other(text)
        }
    }

    public var text: String {
        switch self {
        case .milliseconds(let ms): return RFC3339.format(unixMilliseconds: ms)
        case .other(let text): return text
        }
    }

    /// The order of the texts (fixed-width RFC 3339 texts compare as their instants do).
    public static func < (a: ChatTime, b: ChatTime) -> Bool {
        switch (a, b) {
        case (.milliseconds(let x), .milliseconds(let y)): return x < y
        case (.milliseconds, .other), (.other, .milliseconds), (.other, .other): return a.text < b.text
        }
    }
}
