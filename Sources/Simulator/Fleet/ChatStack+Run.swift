import LabKernel
import SecureChatClient
import SecureChatServer

/// The chat stack's bucket ends and the run's end: counters, the server's load, invariants.
extension ChatStack {
    /// A device connected this long has caught up with everything sent before.
    static let caughtUpAfter: TimeSpan = .minutes(5)

    /// Adds what a running client counted since the last look to the fleet's metrics.
    mutating func recordStats(_ device: Int, fleet: inout Fleet) {
        guard let stats = clients[device]?.stats else { return }
        let before = recordedStats[device] ?? ChatClient.Stats()
        fleet.recorder.add(metrics.decrypted, Double(stats.decrypted - before.decrypted))
        fleet.recorder.add(metrics.failures, Double(stats.decryptionFailures - before.decryptionFailures))
        fleet.recorder.add(metrics.reconnects, Double(stats.reconnects - before.reconnects))
        fleet.recorder.add(metrics.replenished, Double(stats.replenished - before.replenished))
        fleet.recorder.add(metrics.refreshes, Double(stats.refreshes - before.refreshes))
        recordedStats[device] = stats
    }

    /// A device's counters over all its client runs.
    func totalStats(_ device: Int) -> ChatClient.Stats {
        (statsBefore[device] ?? ChatClient.Stats()).adding(clients[device]?.stats ?? ChatClient.Stats())
    }

    /// Bucket end: connected devices, the server's load, the clients' counters.
    mutating func closeBucket(fleet: inout Fleet, start: Int64, now: Instant) {
        fleet.recorder.set(metrics.connected, Double(connectionOf.count))
        fleet.recorder.set(metrics.serverUtilisation, serving.pool.utilisation(bucketStart: start, now: now))
        fleet.recorder.set(metrics.serverQueue, Double(serving.pool.queueLength))
        for device in awakeSince.keys.sorted() { recordStats(device, fleet: &fleet) }
    }

    /// End of run: every device connected and caught up has read every message sent more
    /// than ten minutes ago; no failures; each sender's order kept; no duplicates; no
    /// plaintext in the server's store.
    mutating func finish(at now: Instant, fleet: inout Fleet) {
        let sim = self
        let ids = sim.invariants
        let caughtUp = Set(sim.connectionOf.keys.filter { (sim.awakeSince[$0] ?? now) <= now - Self.caughtUpAfter })
        // These passes run at the end, when the run's memory is at its peak: they go through
        // the tables in their own order and report the violation of the smallest key (the
        // same every run), without a sorted copy of the keys or the records.
        var unread = UnorderedChecks<String>(), unsettled = UnorderedChecks<String>()
        for (text, record) in sim.sent.open where now - record.at > .minutes(10) {
            // Only what the server accepted is expected of readers; what it refused (the user
            // had left by the time the queue sent it) settles as a refusal.
            if record.acked {
                let missing = record.pending.filter { caughtUp.contains($0) }
                unread.check(text, missing.isEmpty, "\(text): connected devices \(missing.sorted()) never decrypted it")
            }
            // Nothing waits for ever in a connected sender's queue.
            let sender = SentMessages.number(of: text).map { sim.chatting[$0.ordinal] } ?? -1
            let stuck = !record.acked && caughtUp.contains(sender)
                && (sim.clients[sender]?.snapshot.pending.contains { ChatStack.original($0.text) == text } ?? false)
            unsettled.check(text, !stuck, "\(text): still queued at its connected sender \(sender) after \(now - record.at)")
        }
        // Every check on a message done with has passed.
        let settled = sim.sent.settled(before: now - .minutes(10))
        unread.passed(settled)
        unsettled.passed(settled)
        unread.record(ids.everyMemberReads, into: &fleet.invariants)
        unsettled.record(ids.sendsSettle, into: &fleet.invariants)
        for device in sim.clients.devices {
            let client = sim.clients[device]!
            let failures = sim.totalStats(device).decryptionFailures
            fleet.invariants.check(ids.noDecryptionFailure, failures == 0,
                             "device \(device): \(failures) messages failed to decrypt (first: \(sim.firstFailure[device] ?? "?"))")
            for channel in client.snapshot.timelines.keys.sorted() {
                let line = client.timeline(channel)
                fleet.invariants.check(ids.noDuplicates, Set(line.map(\.id)).count == line.count, "device \(device): a message twice in \(channel)")
                var last: [String: Int] = [:]
                for message in line {
                    let parts = ChatStack.original(message.text).split(separator: ".")
                    guard parts.count == 3, let n = Int(parts[2]) else { continue }
                    let sender = String(parts[1])
                    fleet.invariants.check(ids.perSenderOrder, n > (last[sender] ?? 0), "device \(device): \(message.text) after \(sender).\(last[sender] ?? 0)")
                    last[sender] = n
                }
            }
        }
        if let invariant = ids.removedReadNothing {
            for (device, retired) in sim.retiredAt.sorted(by: { $0.key < $1.key }) {
                let late = (sim.clients[device].map { client in client.snapshot.channels.keys.flatMap { client.timeline($0) } } ?? [])
                    .filter { (sim.sent.sentAt(ChatStack.original($0.text)) ?? .zero) > retired }
                fleet.invariants.check(invariant, late.isEmpty, "device \(device), removed at \(retired), holds \(late.map(\.text).sorted().prefix(3))")
            }
        }
        var readable = UnorderedChecks<String>()
        sim.server.state.messages.forEach { message in
            readable.check(message.id, message.protocolVersion == 2 && !message.content.contains(".d"), "message \(message.id) is stored readable")
        }
        readable.record(ids.noPlaintextOnServer, into: &fleet.invariants)
    }
}
