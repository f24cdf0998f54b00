import LabKernel
public import LabStore

/// Every metric a run can record: its kind, unit and meaning. Scenario thresholds are
/// checked against this list when the file is loaded, so a typo fails before the run.
public enum MetricCatalog {
    public struct Entry: Sendable {
        public var name: String
        public var kind: MetricKind
        public var unit: MetricUnit
        public var labelKeys: [String]
        public var description: String

        public var defaultStatistic: ThresholdStatistic {
            switch kind {
            case .counter: return .total
            case .gauge: return .mean
            case .histogram: return .percentile(50)
            }
        }

        /// Why `statistic` does not apply to this metric, or nil.
        public func problem(with statistic: ThresholdStatistic) -> String? {
            switch (kind, statistic) {
            case (.histogram, .percentile), (.histogram, .mean), (.histogram, .max), (.histogram, .min), (.histogram, .count):
                return nil
            case (.counter, .total):
                return nil
            case (.gauge, .mean), (.gauge, .max), (.gauge, .min), (.gauge, .last):
                return nil
            default:
                let allowed: String
                switch kind {
                case .histogram: allowed = "percentile, mean, max, min or count"
                case .counter: allowed = "total"
                case .gauge: allowed = "mean, max, min or last"
                }
                return "\(name) is a \(kind.rawValue); its thresholds use \(allowed), not \(statistic)"
            }
        }
    }

    public static let entries: [Entry] = [
        Entry(name: "sim.events", kind: .counter, unit: .count, labelKeys: [], description: "Kernel events processed"),
        Entry(name: "ticks", kind: .counter, unit: .count, labelKeys: ["mode", "power_state"],
              description: "Engine ticks, executed one by one or fast-forwarded in bulk"),
        Entry(name: "device.seconds", kind: .counter, unit: .seconds, labelKeys: ["power_state"],
              description: "Device time spent in each power state"),
        Entry(name: "device.active_seconds", kind: .counter, unit: .seconds, labelKeys: ["power_state"],
              description: "Device time with the engine's tick loop running"),
        Entry(name: "lifecycle.transitions", kind: .counter, unit: .count, labelKeys: ["cause"],
              description: "App lifecycle changes by cause"),
        Entry(name: "power.transitions", kind: .counter, unit: .count, labelKeys: ["to"],
              description: "Power state changes by new state"),
        Entry(name: "charger.plugs", kind: .counter, unit: .count, labelKeys: ["kind"],
              description: "Charger plug-ins, overnight or top-up"),
        Entry(name: "network.changes", kind: .counter, unit: .count, labelKeys: ["to"],
              description: "Radio changes by new state"),
        Entry(name: "sessions", kind: .counter, unit: .count, labelKeys: ["app"],
              description: "Screen sessions, in our app or another"),
        Entry(name: "devices.power_state", kind: .gauge, unit: .count, labelKeys: ["power_state"],
              description: "Devices in each power state at the end of each bucket"),
        Entry(name: "devices.app_state", kind: .gauge, unit: .count, labelKeys: ["state"],
              description: "Devices in each app state at the end of each bucket"),
        Entry(name: "devices.network", kind: .gauge, unit: .count, labelKeys: ["network"],
              description: "Devices on each network at the end of each bucket"),
        Entry(name: "battery.mean", kind: .gauge, unit: .percent, labelKeys: [],
              description: "Mean battery level at the end of each bucket"),
        Entry(name: "battery.level", kind: .histogram, unit: .percent, labelKeys: [],
              description: "Battery level of every device at the end of each bucket"),
        Entry(name: "session.length", kind: .histogram, unit: .nanoseconds, labelKeys: ["app"],
              description: "Length of screen sessions"),
        Entry(name: "ticks.per_device_hour", kind: .histogram, unit: .perHour, labelKeys: ["power_state"],
              description: "Each device's ticks per hour spent in a power state, over the run"),
        Entry(name: "workflow.started", kind: .counter, unit: .count, labelKeys: ["sequence"], description: "Workflow instances started"),
        Entry(name: "workflow.finished", kind: .counter, unit: .count, labelKeys: ["outcome", "sequence"],
              description: "Workflow instances finished, by outcome"),
        Entry(name: "workflow.steps", kind: .counter, unit: .count, labelKeys: ["sequence"], description: "Handler executions (retries included)"),
        Entry(name: "workflow.retries", kind: .counter, unit: .count, labelKeys: ["sequence"], description: "Handler executions that were retries"),
        Entry(name: "workflow.step_latency", kind: .histogram, unit: .nanoseconds, labelKeys: ["sequence", "step"],
              description: "From the tick that starts a step without a wait to its completion (handler time, queueing, tick delay)"),
        Entry(name: "workflow.input_wait", kind: .histogram, unit: .nanoseconds, labelKeys: ["sequence"],
              description: "From a step's prompt to the answer reaching the engine"),
        Entry(name: "workflow.duration", kind: .histogram, unit: .nanoseconds, labelKeys: ["outcome", "sequence"],
              description: "From an instance's start to its end, by outcome"),
        Entry(name: "workflow.rejected", kind: .counter, unit: .count, labelKeys: ["reason"],
              description: "Starts refused: an engine limit, the phone off, or too many starts queued"),
        Entry(name: "workflow.answers", kind: .counter, unit: .count, labelKeys: ["outcome"],
              description: "Prompts answered, never answered, or lost with a phone that died"),
        Entry(name: "workflow.active", kind: .gauge, unit: .count, labelKeys: [], description: "Active workflow instances fleet-wide at each bucket end"),
        Entry(name: "workflow.recoveries", kind: .counter, unit: .count, labelKeys: [], description: "Engines restored from their store at an app launch"),
        Entry(name: "workflow.lost_handlers", kind: .counter, unit: .count, labelKeys: [],
              description: "Handler results lost because the app was killed while they ran"),
        Entry(name: "faults.active", kind: .gauge, unit: .count, labelKeys: ["kind"],
              description: "1 in buckets where a fault of the kind was in force (the dashboard shades them)"),
        Entry(name: "sync.requests", kind: .counter, unit: .count, labelKeys: ["outcome"],
              description: "Sync requests by how they ended: ok, refused (503), timeout, unreachable (offline or partitioned)"),
        Entry(name: "sync.interval", kind: .histogram, unit: .nanoseconds, labelKeys: ["power_state"],
              description: "Time between a device's consecutive sync starts, by its power state"),
        Entry(name: "sync.outbox_depth", kind: .gauge, unit: .count, labelKeys: [], description: "Outbox entries waiting, fleet-wide"),
        Entry(name: "sync.server_utilisation", kind: .gauge, unit: .percent, labelKeys: [], description: "Busy workers over the bucket"),
        Entry(name: "sync.server_queue", kind: .gauge, unit: .count, labelKeys: [], description: "Requests waiting for a worker at the bucket end"),
        Entry(name: "sync.server_wait", kind: .histogram, unit: .nanoseconds, labelKeys: [], description: "Time a request waited for a worker"),
        Entry(name: "sync.approval_round_trip", kind: .histogram, unit: .nanoseconds, labelKeys: [],
              description: "From a device handing a gate to the operator to the device applying the decision"),
        Entry(name: "sync.command_latency", kind: .histogram, unit: .nanoseconds, labelKeys: ["push"],
              description: "From a command's creation to its application on the device, with and without a push"),
        Entry(name: "sync.commands", kind: .counter, unit: .count, labelKeys: ["outcome"], description: "Commands received by devices, by outcome"),
        Entry(name: "sync.approvals_created", kind: .counter, unit: .count, labelKeys: [], description: "Approvals the server created"),
        Entry(name: "sync.approvals_resolved", kind: .counter, unit: .count, labelKeys: [], description: "Approvals the operator resolved"),
        Entry(name: "chat.messages", kind: .counter, unit: .count, labelKeys: ["kind"], description: "Chat messages sent (and acknowledged by the server), by channel kind"),
        Entry(name: "chat.ack_latency", kind: .histogram, unit: .nanoseconds, labelKeys: ["kind"],
              description: "From the user's send to the server's acknowledgement reaching the sending device"),
        Entry(name: "chat.delivery_latency", kind: .histogram, unit: .nanoseconds, labelKeys: ["kind"],
              description: "From the user's send to the message decrypted on a recipient device"),
        Entry(name: "chat.decrypted", kind: .counter, unit: .count, labelKeys: [], description: "Messages decrypted on devices (pairwise and group)"),
        Entry(name: "chat.decryption_failures", kind: .counter, unit: .count, labelKeys: [], description: "Messages a device could not decrypt (must be zero)"),
        Entry(name: "chat.reconnects", kind: .counter, unit: .count, labelKeys: [], description: "Socket reconnect attempts"),
        Entry(name: "chat.otk_replenished", kind: .counter, unit: .count, labelKeys: [], description: "One-time key uploads after keys.low_otp"),
        Entry(name: "chat.refreshes", kind: .counter, unit: .count, labelKeys: [], description: "Access-token refreshes (rotations)"),
        Entry(name: "chat.connected", kind: .gauge, unit: .count, labelKeys: [], description: "Chat devices with an open socket at the bucket end"),
        Entry(name: "chat.typing", kind: .counter, unit: .count, labelKeys: [], description: "typing.start frames the server fanned out to other devices"),
        Entry(name: "chat.sessions_lost", kind: .counter, unit: .count, labelKeys: [],
              description: "Sessions the server ended that the user did not (a refresh presented again after its grace: the app never got the answer)"),
        Entry(name: "chat.server_utilisation", kind: .gauge, unit: .percent, labelKeys: [], description: "Busy chat-server workers over the bucket"),
        Entry(name: "chat.server_queue", kind: .gauge, unit: .count, labelKeys: [],
              description: "Requests, socket opens and frames waiting for a chat-server worker at the bucket end"),
        Entry(name: "chat.server_wait", kind: .histogram, unit: .nanoseconds, labelKeys: [], description: "Time a chat request waited for a worker"),
        Entry(name: "agent.chats", kind: .counter, unit: .count, labelKeys: ["workflow"], description: "Agent chats users started, by workflow"),
        Entry(name: "agent.completed", kind: .counter, unit: .count, labelKeys: ["workflow"], description: "Agent chats whose run completed, by workflow"),
        Entry(name: "agent.inputs", kind: .counter, unit: .count, labelKeys: [], description: "Inputs users gave agents (messages and tool-call answers)"),
        Entry(name: "agent.first_chunk", kind: .histogram, unit: .nanoseconds, labelKeys: [],
              description: "From a user's input to the first chunk of the agent's answer on the phone (think time and links included)"),
        Entry(name: "agent.run_duration", kind: .histogram, unit: .nanoseconds, labelKeys: ["workflow"],
              description: "From a chat's start to its chat.run_complete on the phone"),
        Entry(name: "agent.resume_replayed", kind: .histogram, unit: .count, labelKeys: [], description: "Events a resume replayed"),
        Entry(name: "agent.resume_time", kind: .histogram, unit: .nanoseconds, labelKeys: [],
              description: "From opening the socket to the resume boundary (the chat in step again)"),
        Entry(name: "agent.tool_response_time", kind: .histogram, unit: .nanoseconds, labelKeys: [],
              description: "From a user's tool-call answer to its chat.tool_response on the phone"),
        Entry(name: "agent.reconnects", kind: .counter, unit: .count, labelKeys: [], description: "Agent socket reconnects after a drop"),
        Entry(name: "agent.connected", kind: .gauge, unit: .count, labelKeys: [], description: "Agent clients with an open socket at the bucket end"),
        Entry(name: "agent.server_utilisation", kind: .gauge, unit: .percent, labelKeys: [], description: "Busy agent-runtime workers over the bucket"),
        Entry(name: "agent.server_queue", kind: .gauge, unit: .count, labelKeys: [],
              description: "Requests, socket opens and frames waiting for an agent-runtime worker at the bucket end"),
        Entry(name: "agent.server_wait", kind: .histogram, unit: .nanoseconds, labelKeys: [], description: "Time an agent-runtime request waited for a worker"),
        Entry(name: "bridge.requests", kind: .counter, unit: .count, labelKeys: ["outcome"],
              description: "AI bridge commands by how they ended: ok, bridge_offline (503), unauthorized (401), timed_out, interrupted, unknown_command, refused, other"),
        Entry(name: "bridge.latency", kind: .histogram, unit: .nanoseconds, labelKeys: ["outcome"],
              description: "From a phone's command to its end (the whole answer, or the failure), through the relay, by outcome"),
        Entry(name: "bridge.first_chunk", kind: .histogram, unit: .nanoseconds, labelKeys: [], description: "From a phone's prompt to the first chunk of the answer"),
        Entry(name: "bridge.pairings", kind: .counter, unit: .count, labelKeys: ["outcome"],
              description: "Pairings after the first (re-pairing after a restart): ok, refused, offline, throttled, timed_out"),
        Entry(name: "bridge.pairing_time", kind: .histogram, unit: .nanoseconds, labelKeys: [], description: "From the PIN's confirm request to the token in the keychain"),
        Entry(name: "bridge.repairs", kind: .counter, unit: .count, labelKeys: [], description: "Phones paired again after their token stopped working"),
        Entry(name: "bridge.daemon_restarts", kind: .counter, unit: .count, labelKeys: [], description: "Daemon restarts (each a new key pair)"),
        Entry(name: "bridge.daemons_online", kind: .gauge, unit: .count, labelKeys: [], description: "Daemons with a tunnel to the relay at the bucket end"),
        Entry(name: "bridge.server_utilisation", kind: .gauge, unit: .percent, labelKeys: [], description: "Busy relay workers over the bucket"),
        Entry(name: "bridge.server_queue", kind: .gauge, unit: .count, labelKeys: [], description: "Phone requests waiting for a relay worker at the bucket end"),
        Entry(name: "bridge.server_wait", kind: .histogram, unit: .nanoseconds, labelKeys: [], description: "Time a phone request waited for a relay worker"),
        Entry(name: "desktop.prompts", kind: .counter, unit: .count, labelKeys: ["outcome"],
              description: "Desktop bridge prompts by how they ended: ok, cancelled, failed (refused, or lost with the socket), not_connected (not at home, desktop asleep)"),
        Entry(name: "desktop.first_chunk", kind: .histogram, unit: .nanoseconds, labelKeys: [], description: "From a phone's prompt to the first chunk of the desktop's answer on that phone"),
        Entry(name: "desktop.turn_time", kind: .histogram, unit: .nanoseconds, labelKeys: [], description: "From a phone's prompt to the end of the turn on the desktop"),
        Entry(name: "desktop.chunks", kind: .counter, unit: .count, labelKeys: [], description: "Answer chunks applied to phones' timelines (every phone of the desktop counts)"),
        Entry(name: "desktop.reconnects", kind: .counter, unit: .count, labelKeys: [], description: "Phones dialling their desktop again after a drop"),
        Entry(name: "desktop.rebuilds", kind: .counter, unit: .count, labelKeys: [], description: "Timelines rebuilt from the desktop's history after a (re)connect"),
        Entry(name: "desktop.rebuild_time", kind: .histogram, unit: .nanoseconds, labelKeys: [], description: "From a phone's dial to a timeline rebuilt from history"),
        Entry(name: "desktop.gave_up", kind: .counter, unit: .count, labelKeys: [], description: "Phones that gave up dialling after the seed's attempt limit"),
        Entry(name: "desktop.phones_connected", kind: .gauge, unit: .count, labelKeys: [], description: "Phones connected to their desktop at the bucket end"),
        Entry(name: "desktop.desktops_awake", kind: .gauge, unit: .count, labelKeys: [], description: "Desktops awake at the bucket end"),
        Entry(name: "http.latency", kind: .histogram, unit: .nanoseconds, labelKeys: ["stack", "endpoint"],
              description: "From the client making a request to its answer reaching it (both links, the server's queue and service), per endpoint"),
        Entry(name: "http.errors", kind: .counter, unit: .count, labelKeys: ["stack", "endpoint", "reason"],
              description: "A load test's failed requests by why: HTTP 503, timeout, unreachable, connection closed"),
        Entry(name: "http.requests", kind: .counter, unit: .count, labelKeys: ["stack", "endpoint"],
              description: "Requests the clients made, answered or not, per endpoint (what http.failures is a share of)"),
        Entry(name: "http.failures", kind: .counter, unit: .count, labelKeys: ["stack", "endpoint"],
              description: "Requests that got a 5xx, no answer in time, or no connection, per endpoint"),
        Entry(name: "push.notifications", kind: .counter, unit: .count, labelKeys: ["stack", "outcome"],
              description: "Pushes each stack's server sent (sent, lost, outage, duplicate) and what they did on arrival (woke, running, not_running)"),
        Entry(name: "energy.joules", kind: .counter, unit: .joules, labelKeys: ["stack", "part"],
              description: "Energy each stack's work cost the phones, radio (with its tail) and CPU"),
        Entry(name: "network.bytes", kind: .counter, unit: .bytes, labelKeys: ["stack", "direction"], description: "Bytes each stack sent and received"),
        Entry(name: "radio.seconds", kind: .counter, unit: .seconds, labelKeys: ["stack"],
              description: "Radio time (active and tail) each stack kept the phones' radios up"),
        Entry(name: "energy.device_day", kind: .histogram, unit: .centipercent, labelKeys: ["stack", "population"],
              description: "Each device's share of its battery a day that a stack's work took, over the run, by population (stack=all: every stack it runs together)"),
        Entry(name: "chat.actions", kind: .counter, unit: .count, labelKeys: ["kind"],
              description: "What chat users did besides sending: devices added and removed, edits, deletes, leaves and rejoins, history pages, presence, logouts, sign-ins"),
        Entry(name: "workflow.engine_ticks", kind: .counter, unit: .count, labelKeys: ["power_state"],
              description: "Engine ticks run (ticks with work), by the power state they ran in"),
        // fleetlab loadtest: the generator's own figures.
        Entry(name: "loadtest.iterations", kind: .counter, unit: .count, labelKeys: ["outcome"],
              description: "Load-test iterations: ok, failed, or dropped (open model: no idle phone when one arrived)"),
        Entry(name: "loadtest.chat_relaunch", kind: .histogram, unit: .nanoseconds, labelKeys: [],
              description: "From a killed chat app's launch to its session restored, its socket open and its channels caught up (--relaunch)"),
        Entry(name: "loadtest.sync_relaunch", kind: .histogram, unit: .nanoseconds, labelKeys: [],
              description: "From a killed sync app's launch to its engine restored from its store and its first sync answered (--relaunch)"),
        Entry(name: "loadtest.start_lag", kind: .histogram, unit: .nanoseconds, labelKeys: [],
              description: "How late the generator started an iteration past its intended time (large values: the generator is the bottleneck)"),
        Entry(name: "loadtest.generator_cpu", kind: .gauge, unit: .percent, labelKeys: [],
              description: "The generator process's CPU over the bucket, as a share of every core"),
        Entry(name: "loadtest.phones", kind: .gauge, unit: .count, labelKeys: [],
              description: "Phones whose turn it is at the bucket end (closed models; with --stages, the stages' count)"),
        Entry(name: "loadtest.arrival_rate", kind: .gauge, unit: .count, labelKeys: [],
              description: "Arrivals a second the open model's schedule is at, at the bucket end"),
        Entry(name: "loadtest.busy_devices", kind: .gauge, unit: .count, labelKeys: [],
              description: "Virtual phones in an iteration at the bucket end"),
    ]

    public static var names: [String] { entries.map(\.name) }

    public static func entry(named name: String) -> Entry? { entries.first { $0.name == name } }
}
