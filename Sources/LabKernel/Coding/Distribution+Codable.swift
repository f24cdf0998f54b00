/// Distributions in files. A plain value is a constant; otherwise one key names the
/// family. Values are numbers, or durations ("5m") which are read as seconds:
///
///     4m                                    # constant
///     {uniform: [1m, 10m]}
///     {exponential: 20m}                    # or {exponential: {mean: 20m}}
///     {lognormal: {median: 2m, sigma: 0.9}}
///     {empirical: [[0, 1s], [0.5, 30s], [0.99, 5m], [1, 20m]]}
extension Distribution: Codable {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case constant, uniform, exponential, lognormal, empirical
    }

    enum ParameterKeys: String, CodingKey, CaseIterable {
        case mean, median, sigma, low, high
    }

    public init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer(), let text = try? single.decode(String.self) {
            self = .constant(try Self.number(text, decoder.codingPath))
            try Self.validate(self, decoder.codingPath)
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let present = CodingKeys.allCases.filter { container.contains($0) }
        guard present.count == 1, let family = present.first else {
            throw DecodingError.dataCorrupted(.init(
                codingPath: decoder.codingPath,
                debugDescription: "a distribution names exactly one of: constant, uniform, exponential, lognormal, empirical"))
        }
        let path = decoder.codingPath + [family]
        switch family {
        case .constant:
            self = .constant(try Self.number(container.decode(String.self, forKey: .constant), path))
        case .uniform:
            if let pair = try? container.decode([String].self, forKey: .uniform) {
                guard pair.count == 2 else {
                    throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "uniform takes [low, high]"))
                }
                self = .uniform(low: try Self.number(pair[0], path), high: try Self.number(pair[1], path))
            } else {
                let p = try container.nestedContainer(keyedBy: ParameterKeys.self, forKey: .uniform)
                self = .uniform(low: try Self.number(p.decode(String.self, forKey: .low), path),
                                high: try Self.number(p.decode(String.self, forKey: .high), path))
            }
        case .exponential:
            if let text = try? container.decode(String.self, forKey: .exponential) {
                self = .exponential(mean: try Self.number(text, path))
            } else {
                let p = try container.nestedContainer(keyedBy: ParameterKeys.self, forKey: .exponential)
                self = .exponential(mean: try Self.number(p.decode(String.self, forKey: .mean), path))
            }
        case .lognormal:
            let p = try container.nestedContainer(keyedBy: ParameterKeys.self, forKey: .lognormal)
            self = .lognormal(median: try Self.number(p.decode(String.self, forKey: .median), path),
                              sigma: try Self.number(p.decode(String.self, forKey: .sigma), path))
        case .empirical:
            let rows = try container.decode([[String]].self, forKey: .empirical)
            self = .empirical(try rows.map { row in
                guard row.count == 2 else {
                    throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "each empirical point is [probability, value]"))
                }
                return EmpiricalPoint(probability: try Self.number(row[0], path), value: try Self.number(row[1], path))
            })
        }
        try Self.validate(self, path)
    }

    static func validate(_ distribution: Distribution, _ path: [any CodingKey]) throws {
        if let problem = distribution.validationProblem {
            throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: problem))
        }
    }

    /// A number, or a duration read as seconds.
    static func number(_ text: String, _ path: [any CodingKey]) throws -> Double {
        let cleaned = String(text.filter { $0 != "_" })
        if let value = Double(cleaned), value.isFinite { return value }
        if let span = TimeSpan(cleaned) { return span.seconds }
        throw DecodingError.dataCorrupted(.init(
            codingPath: path, debugDescription: "expected a number or a duration like 30s, found '\(text)'"))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .constant(let v): try container.encode(v, forKey: .constant)
        case .uniform(let low, let high): try container.encode([low, high], forKey: .uniform)
        case .exponential(let mean): try container.encode(mean, forKey: .exponential)
        case .lognormal(let median, let sigma):
            var p = container.nestedContainer(keyedBy: ParameterKeys.self, forKey: .lognormal)
            try p.encode(median, forKey: .median)
            try p.encode(sigma, forKey: .sigma)
        case .empirical(let points): try container.encode(points.map { [$0.probability, $0.value] }, forKey: .empirical)
        }
    }
}
