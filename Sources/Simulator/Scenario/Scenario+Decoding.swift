import LabKernel

extension Scenario: Decodable {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case name, description, seed, duration, startAt, bucket, ticks, links, devices, faults, thresholds, eventSample, workflows, sync, chat, agent, bridge, desktop,
             push, energy
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func fail(_ key: CodingKeys, _ message: String) -> DecodingError {
            DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [key], debugDescription: message))
        }
        name = try c.decode(String.self, forKey: .name)
        guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) else {
            throw fail(.name, "a scenario name uses letters, digits, '-', '_' and '.' only")
        }
        description = try c.decodeIfPresent(String.self, forKey: .description) ?? ""
        seed = try c.decode(UInt64.self, forKey: .seed)
        duration = try c.decode(TimeSpan.self, forKey: .duration)
        guard duration > .zero && duration <= .days(366) else { throw fail(.duration, "a duration is between 1ns and 366d") }
        if let start = try c.decodeIfPresent(String.self, forKey: .startAt) {
            guard let tod = parseTimeOfDay(start) else { throw fail(.startAt, "expected a time of day like 08:00, found '\(start)'") }
            startAt = tod
        } else {
            startAt = .hours(8)
        }
        bucket = try c.decodeIfPresent(TimeSpan.self, forKey: .bucket) ?? Self.defaultBucket(for: duration)
        guard bucket >= .seconds(1) else { throw fail(.bucket, "a bucket is at least 1s") }
        guard duration.nanoseconds / bucket.nanoseconds <= 100_000 else { throw fail(.bucket, "more than 100,000 buckets; use a wider bucket") }
        ticks = try c.decodeIfPresent(TickSettings.self, forKey: .ticks) ?? TickSettings()
        links = try c.decodeIfPresent(LinkSettings.self, forKey: .links) ?? LinkSettings()
        devices = try c.decode([Population].self, forKey: .devices)
        guard !devices.isEmpty else { throw fail(.devices, "a scenario has at least one device population") }
        var seen: Set<String> = []
        for (index, population) in devices.enumerated() where !seen.insert(population.name).inserted {
            throw DecodingError.dataCorrupted(.init(
                codingPath: c.codingPath + [CodingKeys.devices, IndexKey(index), Population.CodingKeys.name],
                debugDescription: "population name '\(population.name)' is used twice"))
        }
        // A server-crash names its server; without the key, the one server the scenario has.
        let sections: [StackKind: CodingKeys] = [.sync: .sync, .chat: .chat, .agent: .agent, .aiBridge: .bridge]
        let servers: [StackKind] = [.sync, .chat, .agent, .aiBridge].filter { c.contains(sections[$0]!) }
        faults = try Fault.$defaultServer.withValue(servers.count > 1 ? nil : servers.first ?? .sync) {
            try c.decodeIfPresent([Fault].self, forKey: .faults) ?? []
        }
        for (index, fault) in faults.enumerated() {
            let path = c.codingPath + [CodingKeys.faults, IndexKey(index)]
            if fault.at >= duration {
                throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "fault at \(fault.at) is not before the end of the run (\(duration))"))
            }
            if let population = fault.population, !seen.contains(population) {
                throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "no device population named '\(population)'"))
            }
        }
        thresholds = try c.decodeIfPresent([Threshold].self, forKey: .thresholds) ?? []
        for (index, threshold) in thresholds.enumerated() {
            let keys = MetricCatalog.entry(named: threshold.metric)?.labelKeys ?? []
            if let unknown = threshold.labels.keys.sorted().first(where: { !keys.contains($0) }) {
                throw DecodingError.dataCorrupted(.init(
                    codingPath: c.codingPath + [CodingKeys.thresholds, IndexKey(index)],
                    debugDescription: "\(threshold.metric) has no label '\(unknown)'"
                        + (keys.isEmpty ? "; it takes none" : "; its labels are: \(keys.joined(separator: ", "))")))
            }
        }
        eventSample = try c.decodeIfPresent(Int.self, forKey: .eventSample) ?? 10_000
        workflows = try c.decodeIfPresent(WorkflowSettings.self, forKey: .workflows)
        for (index, workload) in (workflows?.workloads ?? []).enumerated() {
            if let unknown = workload.populations.first(where: { !seen.contains($0) }) {
                throw DecodingError.dataCorrupted(.init(
                    codingPath: c.codingPath + [CodingKeys.workflows, WorkflowSettings.CodingKeys.run, IndexKey(index)],
                    debugDescription: "no device population named '\(unknown)'"))
            }
        }
        chat = try c.decodeIfPresent(ChatSettings.self, forKey: .chat)
        agent = try c.decodeIfPresent(AgentSettings.self, forKey: .agent)
        bridge = try c.decodeIfPresent(BridgeSettings.self, forKey: .bridge)
        desktop = try c.decodeIfPresent(DesktopSettings.self, forKey: .desktop)
        push = try c.decodeIfPresent(PushSettings.self, forKey: .push) ?? PushSettings()
        energy = try c.decodeIfPresent(EnergySettings.self, forKey: .energy) ?? EnergySettings()
        sync = try c.decodeIfPresent(SyncSettings.self, forKey: .sync)
        try checkStacks(c)
        if let sync {
            guard let workflows else { throw fail(.sync, "sync needs a workflows section: the devices' engines are what syncs") }
            let sequences = Set(workflows.workloads.map(\.sequenceName))
            for (index, campaign) in sync.campaigns.enumerated() {
                let path = c.codingPath + [CodingKeys.sync, SyncSettings.CodingKeys.campaigns, IndexKey(index)]
                guard sequences.contains(campaign.sequence) else {
                    throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription:
                        "campaign sequence '\(campaign.sequence)' is not run by any workload; workloads run: \(sequences.sorted().joined(separator: ", "))"))
                }
                if let population = campaign.population, !seen.contains(population) {
                    throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "no device population named '\(population)'"))
                }
                guard campaign.at < duration else {
                    throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "campaign at \(campaign.at) is not before the end of the run"))
                }
            }
        }
        for (index, fault) in faults.enumerated() {
            let needs = fault.needs
            guard !needs.isEmpty, !needs.contains(where: runs) else { continue }
            let names = needs.sorted().map(\.rawValue).joined(separator: " or ")
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.faults, IndexKey(index)],
                                                    debugDescription: "a \(fault.kind) fault needs a population that runs \(names)"))
        }
        guard (0...1_000_000).contains(eventSample) else { throw fail(.eventSample, "expected 0...1000000 events") }
    }

    /// Every stack a population lists has its section, sync rides on the same devices'
    /// engines, and a population that runs workflows has a workload that applies to it.
    func checkStacks(_ c: KeyedDecodingContainer<CodingKeys>) throws {
        for (index, population) in devices.enumerated() {
            guard let listed = population.stacks else { continue }
            let path = c.codingPath + [CodingKeys.devices, IndexKey(index), Population.CodingKeys.stacks]
            func fail(_ message: String) -> DecodingError { .dataCorrupted(.init(codingPath: path, debugDescription: message)) }
            let sections: [StackKind: Bool] = [.workflows: workflows != nil, .sync: sync != nil, .chat: chat != nil, .agent: agent != nil, .aiBridge: bridge != nil,
                                               .desktopBridge: desktop != nil]
            for stack in listed.sorted() where sections[stack] != true {
                let section = stack == .aiBridge ? "bridge" : stack == .desktopBridge ? "desktop" : stack.rawValue
                throw fail("'\(population.name)' runs \(stack.rawValue) but the scenario has no \(section): section")
            }
            if listed.contains(.sync) && !listed.contains(.workflows) {
                throw fail("sync needs workflows on the same devices: the engine is what syncs")
            }
            if listed.contains(.workflows), let workflows,
               !workflows.workloads.contains(where: { $0.populations.isEmpty || $0.populations.contains(population.name) }) {
                throw fail("'\(population.name)' runs workflows but no workload under workflows.run applies to it")
            }
        }
        if sync != nil, workflows != nil, !runs(.sync) {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.sync], debugDescription: "no population runs sync"))
        }
    }

    /// The narrowest of a few round widths that gives at most 200 buckets.
    static func defaultBucket(for duration: TimeSpan) -> TimeSpan {
        let choices: [TimeSpan] = [.minutes(1), .minutes(5), .minutes(10), .minutes(15), .minutes(30), .hours(1), .hours(2), .hours(6), .days(1)]
        return choices.first { duration.nanoseconds / $0.nanoseconds <= 200 } ?? .days(1)
    }
}
