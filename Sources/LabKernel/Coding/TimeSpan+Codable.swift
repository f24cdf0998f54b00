/// Durations in files are text ("250ms", "6h", "1h30m") or plain numbers of seconds.
extension TimeSpan: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let span = TimeSpan(text) else {
            throw DecodingError.dataCorrupted(.init(
                codingPath: decoder.codingPath,
                debugDescription: "expected a duration like 250ms, 30s, 6h or 1h30m, found '\(text)'"))
        }
        self = span
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// Probabilities in files are decimals ("0.15") or percentages ("15%").
extension Ratio: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let ratio = Ratio(parsing: text) else {
            throw DecodingError.dataCorrupted(.init(
                codingPath: decoder.codingPath,
                debugDescription: "expected a probability like 0.15 or 15% (between 0 and 1), found '\(text)'"))
        }
        self = ratio
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
