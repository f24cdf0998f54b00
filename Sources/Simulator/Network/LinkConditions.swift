import LabKernel

/// The access links as they are now: the scenario's profiles, each kind's latency
/// stretched while a `link-slowdown` fault is in force on it (a congested carrier, a
/// stadium's Wi-Fi, a slow route to the data centre).
///
/// Every stack draws a link's latency here, from its own stream, and the factor stretches
/// the draw rather than changing it: the draws, and so the run before a slowdown and
/// everything a slowdown does not touch, stay as they were.
struct LinkConditions {
    let settings: LinkSettings
    /// Each kind's factor, by `AccessKind.rawValue` (1: as the profile draws it).
    private var factors: [Double] = Array(repeating: 1, count: AccessKind.allCases.count)

    init(_ settings: LinkSettings) { self.settings = settings }

    mutating func setSlowdown(_ factor: Double, of kind: AccessKind) { factors[Int(kind.rawValue)] = factor }

    /// One-way latency of `kind` now, in seconds, drawn from `generator`.
    func latency(_ kind: AccessKind, using generator: inout SeededGenerator) -> Double {
        settings.profile(kind).latency.sample(using: &generator) * factors[Int(kind.rawValue)]
    }
}
