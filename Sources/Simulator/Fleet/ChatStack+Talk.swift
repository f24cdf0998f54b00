import LabCrypto
import LabKernel
import SecureChatClient
import SecureChatServer

extension ChatStack {
    /// Sign-ups (phase 0), logins of the other devices (1), groups (2), members and DMs (3),
    /// then everyone starts talking.
    mutating func setup(_ phase: UInt8, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        // Plain values only: a copy of the simulation would make every client change copy the table.
        let devicesOfUser = devicesOfUser, groups = groups, dmPartners = dmPartners
        // The accounts exist before the run: every phone that will sign up runs its client.
        if phase == 0 { for device in active.sorted() { follow(device, fleet: &fleet, now: now, queue: &queue) } }
        for (user, list) in devicesOfUser.enumerated() {
            switch phase {
            case 0:
                feed(list[0], .register(username: "user\(user)", password: "correct horse \(user)", deviceName: "d\(ordinal[list[0]]!)"), now: now, queue: &queue, fleet: &fleet)
            case 1:
                for device in list.dropFirst() where active.contains(device) {
                    feed(device, .login(username: "user\(user)", password: "correct horse \(user)", deviceName: "d\(ordinal[device]!)"), now: now, queue: &queue, fleet: &fleet)
                }
            default:
                break
            }
        }
        switch phase {
        case 2:
            for (g, members) in groups.enumerated() { feed(devicesOfUser[members[0]][0], .createGroup(name: "g\(g)"), now: now, queue: &queue, fleet: &fleet) }
        case 3:
            for (g, members) in groups.enumerated() {
                let creator = devicesOfUser[members[0]][0]
                guard let channel = clients[creator]?.snapshot.channels.values.first(where: { $0.name == "g\(g)" })?.id else { continue }
                groupChannel[g] = channel
                for member in members.dropFirst() {
                    guard let userID = clients[devicesOfUser[member][0]]?.userID else { continue }
                    feed(creator, .addMember(channelID: channel, userID: userID), now: now, queue: &queue, fleet: &fleet)
                }
            }
            for (user, partners) in dmPartners.sorted(by: { $0.key < $1.key }) {
                for other in partners where other > user {
                    guard let userID = clients[devicesOfUser[other][0]]?.userID else { continue }
                    feed(devicesOfUser[user][0], .openDM(userID: userID), now: now, queue: &queue, fleet: &fleet)
                }
            }
            // Users act once the state the run starts from is in place.
            let begin = ChatStack.provisioningEnds
            scheduleActions(now: begin, queue: &queue, fleet: &fleet)
            let rate = settings.peakRate
            guard rate > 0 else { return }
            for user in devicesOfUser.indices {
                let gap = Distribution.exponential(mean: 3_600 / rate).sample(using: &userStreams[user])
                queue.schedule(.chat(.talk(user: UInt32(user))), at: begin + .milliseconds(Int64(gap * 1_000)))
            }
        default:
            break
        }
    }

    /// A user sends one message from `device` (its app open: `writer` chose it), to a
    /// group or a DM.
    mutating func talk(_ user: Int, from device: Int, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard awakeSince[device] != nil else { return }
        let myGroups = (groupsOfUser[user] ?? []).filter { groupChannel[$0] != nil }
        let dms = (clients[device]?.snapshot.channels.values.filter(\.isDM).map(\.id) ?? []).sorted()
        let toGroup = !myGroups.isEmpty && (dms.isEmpty || userStreams[user].chance(settings.groupShare))
        guard toGroup || !dms.isEmpty else { return }
        let channel: String
        if toGroup {
            channel = groupChannel[myGroups[Int(userStreams[user].next() % UInt64(myGroups.count))]]!
        } else {
            channel = dms[Int(userStreams[user].next() % UInt64(dms.count))]
        }
        // A user the server does not have as a member (added back a moment ago, the add
        // still on its way) would be refused: they wait.
        guard let userID = clients[device]?.userID, server.state.isMember(userID, of: channel) else { return }
        if editOrDelete(device, channel: channel, now: now, queue: &queue, fleet: &fleet) { return }
        // Readers: every active device of every member (as the server has them at the
        // moment of sending), but the sender's, whose keys and membership have had time to
        // reach a connected sender (`readerGrace`).
        let readers = readers(of: channel, sender: device, now: now, fleet: &fleet)
        let text = sent.send(user: user, ordinal: ordinal[device]!, at: now, group: toGroup, channel: channel, readers: readers)
        if userStreams[user].chance(settings.typingShare) {
            feed(device, .typing(channelID: channel, started: true), now: now, queue: &queue, fleet: &fleet)
        }
        feed(device, .send(channelID: channel, text: text), now: now, queue: &queue, fleet: &fleet)
    }
}
