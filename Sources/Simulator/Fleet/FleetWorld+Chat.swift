import LabCrypto
import LabKernel
import SecureChatClient
import SecureChatServer

extension FleetWorld {
    /// Users, their devices and the plan of groups and DMs, before the first event.
    mutating func setUpChat(_ settings: ChatSettings) {
        let seed = root.child(.server).child("chat")
        var config = ChatServerConfig()
        config.passwordCost = .minimum  // thousands of sign-ups; the cost is not what this models
        let server = ChatServer(config: config, seed: seed.child("core"), wallClock: engineClock)
        var plan = seed.child("plan").generator()
        var chatting: [Int] = []
        for (index, deviceClass) in classes.enumerated() where settings.populations.isEmpty || settings.populations.contains(deviceClass.name) {
            chatting += devices.indices.filter { Int(classOfDevice[$0]) == index }
        }
        var devicesOfUser: [[Int]] = []
        var cursor = 0
        while cursor < chatting.count {
            let draw = plan.nextUnit()
            let n = draw < settings.devicesPerUser[0].fraction ? 1 : draw < settings.devicesPerUser[0].fraction + settings.devicesPerUser[1].fraction ? 2 : 3
            devicesOfUser.append(Array(chatting[cursor..<min(chatting.count, cursor + n)]))
            cursor += n
        }
        var sim = ChatSimulation(server: server, generator: seed.child("network").generator(),
                                 metrics: ChatMetrics(recorder: &recorder, actions: settings.churn.isOn || settings.actions != ChatActions()), invariants: ChatInvariants(ledger: &invariants,
                                                            devicesLeave: settings.churn.removesPerUserDay > 0 || settings.actions.logoutsPerUserDay > 0
                                                                || settings.actions.logoutAllsPerUserDay > 0))
        sim.devicesOfUser = devicesOfUser
        for (user, list) in devicesOfUser.enumerated() {
            for (position, device) in list.enumerated() {
                sim.userOfDevice[device] = user
                sim.clients[device] = ChatClient(snapshot: ChatClient.Snapshot(seed: seed.child("device").child(UInt64(device))))
                // With churn, a user's last phone (of two or three) is one they add later.
                let later = settings.churn.addsPerUserDay > 0 && list.count > 1 && position == list.count - 1
                if !later { sim.active.insert(device) }
            }
        }
        let users = devicesOfUser.count
        if users >= settings.groupSize.lowerBound {
            for g in 0..<settings.groups {
                let size = min(users, settings.groupSize.lowerBound + Int(plan.next() % UInt64(settings.groupSize.count)))
                var members: [Int] = []
                while members.count < size {
                    let user = Int(plan.next() % UInt64(users))
                    if !members.contains(user) { members.append(user) }
                }
                sim.groups.append(members)
                for user in members { sim.groupsOfUser[user, default: []].append(g) }
            }
        }
        if users >= 2 {
            for user in 0..<users {
                for _ in 0..<settings.dmsPerUser {
                    var other = Int(plan.next() % UInt64(users))
                    if other == user { other = (other + 1) % users }
                    if sim.dmPartners[user]?.contains(other) ?? false { continue }
                    sim.dmPartners[user, default: []].append(other)
                    sim.dmPartners[other, default: []].append(user)
                }
            }
        }
        chatSim = sim
    }

    /// Sign-ups (phase 0), logins of the other devices (1), groups (2), members and DMs (3),
    /// then everyone starts talking.
    mutating func chatSetup(_ phase: UInt8, now: Instant, queue: inout EventQueue<Event>) {
        guard chatSim != nil else { return }
        // Plain values only: a copy of the simulation would make every client change copy the table.
        let devicesOfUser = chatSim!.devicesOfUser, groups = chatSim!.groups, dmPartners = chatSim!.dmPartners
        for (user, list) in devicesOfUser.enumerated() {
            switch phase {
            case 0:
                chatInput(list[0], .register(username: "user\(user)", password: "correct horse \(user)", deviceName: "d\(list[0])"), now: now, queue: &queue)
            case 1:
                for device in list.dropFirst() where chatSim!.active.contains(device) {
                    chatInput(device, .login(username: "user\(user)", password: "correct horse \(user)", deviceName: "d\(device)"), now: now, queue: &queue)
                }
            default:
                break
            }
        }
        switch phase {
        case 2:
            for (g, members) in groups.enumerated() { chatInput(devicesOfUser[members[0]][0], .createGroup(name: "g\(g)"), now: now, queue: &queue) }
        case 3:
            for (g, members) in groups.enumerated() {
                let creator = devicesOfUser[members[0]][0]
                guard let channel = chatSim!.clients[creator]?.snapshot.channels.values.first(where: { $0.name == "g\(g)" })?.id else { continue }
                chatSim!.groupChannel[g] = channel
                for member in members.dropFirst() {
                    guard let userID = chatSim!.clients[devicesOfUser[member][0]]?.userID else { continue }
                    chatInput(creator, .addMember(channelID: channel, userID: userID), now: now, queue: &queue)
                }
            }
            for (user, partners) in dmPartners.sorted(by: { $0.key < $1.key }) {
                for other in partners where other > user {
                    guard let userID = chatSim!.clients[devicesOfUser[other][0]]?.userID else { continue }
                    chatInput(devicesOfUser[user][0], .openDM(userID: userID), now: now, queue: &queue)
                }
            }
            scheduleChatActions(now: now + .seconds(60), queue: &queue)
            let rate = scenario.chat!.peakRate
            guard rate > 0 else { return }
            for user in devicesOfUser.indices {
                let gap = Distribution.exponential(mean: 3_600 / rate).sample(using: &chatSim!.generator)
                queue.schedule(.chatTalk(user: UInt32(user)), at: now + .seconds(60) + .milliseconds(Int64(gap * 1_000)))
            }
        default:
            break
        }
    }

    /// A user sends one message from a connected device, to a group or a DM.
    mutating func chatTalk(_ user: Int, now: Instant, queue: inout EventQueue<Event>) {
        guard chatSim != nil, let settings = scenario.chat else { return }
        // Poisson at the peak rate, thinned to the hour's rate.
        let gap = Distribution.exponential(mean: 3_600 / settings.peakRate).sample(using: &chatSim!.generator)
        queue.schedule(.chatTalk(user: UInt32(user)), at: now + .milliseconds(max(1, Int64(gap * 1_000))))
        let hour = Int(((scenario.startAt.nanoseconds + now.nanoseconds) / 3_600_000_000_000) % 24)
        guard chatSim!.generator.nextUnit() < settings.keep(hour: hour) else { return }
        guard let device = chatConnectedDevice(of: user) else { return }
        let myGroups = (chatSim!.groupsOfUser[user] ?? []).filter { chatSim!.groupChannel[$0] != nil }
        let dms = (chatSim!.clients[device]?.snapshot.channels.values.filter(\.isDM).map(\.id) ?? []).sorted()
        let toGroup = !myGroups.isEmpty && (dms.isEmpty || chatSim!.generator.chance(settings.groupShare))
        guard toGroup || !dms.isEmpty else { return }
        let channel: String
        if toGroup {
            channel = chatSim!.groupChannel[myGroups[Int(chatSim!.generator.next() % UInt64(myGroups.count))]]!
        } else {
            channel = dms[Int(chatSim!.generator.next() % UInt64(dms.count))]
        }
        // A user the server does not have as a member (added back a moment ago, the add
        // still on its way) would be refused: they wait.
        guard let userID = chatSim!.clients[device]?.userID, chatSim!.server.state.isMember(userID, of: channel) else { return }
        if chatEditOrDelete(device, channel: channel, now: now, queue: &queue) { return }
        // Readers: every active device of every member (as the server has them at the
        // moment of sending), but the sender's, whose keys and membership have had time to
        // reach a connected sender (`readerGrace`).
        let readers = chatReaders(of: channel, sender: device, now: now)
        chatSim!.sequence[device, default: 0] += 1
        let text = "u\(user).d\(device).\(chatSim!.sequence[device]!)"
        chatSim!.sent[text] = ChatSimulation.Sent(at: now, group: toGroup, channel: channel, pending: readers)
        if chatSim!.generator.chance(settings.typingShare) {
            chatInput(device, .typing(channelID: channel, started: true), now: now, queue: &queue)
        }
        chatInput(device, .send(channelID: channel, text: text), now: now, queue: &queue)
    }
}
