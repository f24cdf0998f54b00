public import LabKernel

/// The client stacks a phone can run. A population lists the ones its devices run
/// (`stacks: [workflows, sync, chat]`); they share the phone's lifecycle, radio, power
/// state and battery.
public enum StackKind: String, CaseIterable, Sendable, Hashable, Comparable, Decodable {
    /// The orch8 workflow engine on the device.
    case workflows
    /// The engine's sync client, against the orch8 mobile sync server.
    case sync
    /// The d3chat client with end-to-end encryption, against the d3chat server.
    case chat
    /// The Mozaiks agent-runtime client, against the runtime's server and its scripted agents.
    case agent
    /// The Mobile AI Bridge client: a phone paired with its user's desktop daemon through the relay.
    case aiBridge = "ai-bridge"
    /// The OpenAgents desktop bridge client: a phone at home mirroring and driving its user's desktop app over the LAN.
    case desktopBridge = "desktop-bridge"

    /// Whether the stack talks to a server of its own that a fault can crash or slow (the
    /// workflow engine has none; a desktop bridge talks to the user's desktop, which sleeps
    /// by its day instead).
    public var hasServer: Bool {
        switch self {
        case .sync, .chat, .agent, .aiBridge: return true
        case .workflows, .desktopBridge: return false
        }
    }

    public static func < (a: StackKind, b: StackKind) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let kind = StackKind(rawValue: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription:
                "unknown stack '\(text)'; expected one of: \(StackKind.allCases.map(\.rawValue).joined(separator: ", "))"))
        }
        self = kind
    }
}

/// The `push:` section: the platform push service (APNs, FCM) every stack's server uses to
/// wake a phone. One token per app, so one share for all stacks.
public struct PushSettings: Sendable, Decodable {
    /// Share of devices whose app registered a push token.
    public var share = Ratio(numerator: 80, denominator: 100)
    public var delay: Distribution = .lognormal(median: 1, sigma: 1)
    public var loss = Ratio(numerator: 1, denominator: 100)
    public var duplication = Ratio(numerator: 5, denominator: 1_000)

    enum CodingKeys: String, CodingKey, CaseIterable { case share, delay, loss, duplication }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        share = try c.decodeIfPresent(Ratio.self, forKey: .share) ?? share
        delay = try c.decodeIfPresent(Distribution.self, forKey: .delay) ?? delay
        loss = try c.decodeIfPresent(Ratio.self, forKey: .loss) ?? loss
        duplication = try c.decodeIfPresent(Ratio.self, forKey: .duplication) ?? duplication
    }
}
