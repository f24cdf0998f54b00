import LabKernel
import LabStore

/// Latency per endpoint of every stack's server, from the client's request to its answer.
struct EndpointsPanel: DashboardPanel {
    let id = "endpoints"
    let title = "Latency by endpoint"
    let caption = "From the client making a request (its intended start) to the answer reaching it: both links, the server's queue and its service. Failures: a 5xx, no answer in time, no connection."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        let figures = RunFigures.endpoints(results)
        guard !figures.isEmpty else { return nil }
        let rows = figures.map { f in
            [f.stack, "<code>\(HTML.escape(f.endpoint))</code>", MetricUnit.decimal(Double(f.requests), digits: 0), MetricUnit.decimal(f.failures, digits: 0),
             MetricUnit.formatDuration(f.p50), MetricUnit.formatDuration(f.p90), MetricUnit.formatDuration(f.p99)]
        }
        var html = HTML.table(headers: ["stack", "endpoint", "requests", "failures", "p50", "p90", "p99"], rows: rows, numericColumns: Set(2...6))
        let errors = RunFigures.errors(results)
        if !errors.isEmpty {
            html += "<p class=\"caption\">Failures by why (a load test's: the status a server answered, or no answer in time, no connection):</p>"
                + HTML.table(headers: ["stack", "endpoint", "why", "requests"],
                             rows: errors.map { [$0.stack, "<code>\(HTML.escape($0.endpoint))</code>", HTML.escape($0.reason), MetricUnit.decimal($0.count, digits: 0)] },
                             numericColumns: [3])
        }
        return html
    }
}

/// What each stack costs a phone's battery.
struct EnergyPanel: DashboardPanel {
    let id = "energy"
    let title = "Battery cost by stack"
    let caption = "Energy each stack's work took on top of the phones' own drain: radio (active, promotion, and the tail after each transfer) and CPU (crypto, engine steps and ticks), per device-hour of the devices that run it."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        let stacks = RunFigures.energy(results)
        guard !stacks.isEmpty else { return nil }
        let rows = stacks.map { s in
            [s.stack, MetricUnit.decimal(Double(s.devices), digits: 0), MetricUnit.decimal(s.joulesPerDeviceHour, digits: 1) + " J",
             MetricUnit.decimal(s.deviceHours > 0 ? s.radioJoules / s.deviceHours : 0, digits: 1) + " J",
             MetricUnit.decimal(s.deviceHours > 0 ? s.cpuJoules / s.deviceHours : 0, digits: 3) + " J",
             MetricUnit.formatDuration(s.deviceHours > 0 ? s.radioSeconds / s.deviceHours * 1e9 : 0),
             MetricUnit.formatBytes(s.deviceHours > 0 ? (s.bytesUp + s.bytesDown) / s.deviceHours : 0),
             MetricUnit.decimal(s.batteryPercentPerDay, digits: 2) + "%"]
        }
        let table = HTML.table(headers: ["stack", "devices", "energy / device-h", "radio", "CPU", "radio on / device-h", "bytes / device-h", "battery / day"],
                               rows: rows, numericColumns: Set(1...7))
        var spread = ""
        let perDevice = RunFigures.deviceEnergy(results)
        if !perDevice.isEmpty {
            let percent = { (value: Double) in MetricUnit.decimal(value, digits: 2) + "%" }
            spread = "<p class=\"caption\">Battery a day per device: half the phones spend less than p50 on a stack's work, one in a hundred more than p99.</p>"
                + HTML.table(headers: ["stack", "devices", "p50", "p90", "p99", "most"],
                             rows: perDevice.map { [($0.stack == "all" ? "every stack" : $0.stack) + ($0.population.map { " · \($0)" } ?? ""),
                                                    MetricUnit.decimal(Double($0.devices), digits: 0),
                                                    percent($0.p50), percent($0.p90), percent($0.p99), percent($0.max)] },
                             numericColumns: Set(1...5))
        }
        var lines: [TimeChart.Line] = []
        for (index, s) in stacks.enumerated() {
            let radio = context.values(results, results.metric(named: "energy.joules", labels: "part=radio,stack=\(s.stack)"))
            let cpu = context.values(results, results.metric(named: "energy.joules", labels: "part=cpu,stack=\(s.stack)"))
            let perDevice = zip(radio, cpu).map { s.devices > 0 ? ($0 + $1) / Double(s.devices) : 0 }
            lines.append(.init(name: "\(s.stack) J per device", color: Palette.series[index], points: atEnds(context, perDevice)))
        }
        return table + spread + "<p class=\"caption\">Energy per device in each bucket:</p>"
            + context.timeChart { MetricUnit.decimal($0, digits: 2) + " J" }.lines(lines) + HTML.legend(lines.map { ($0.name, $0.color) })
    }
}

/// Pushes by the stack whose server sent them, and what they did.
struct PushPanel: DashboardPanel {
    let id = "pushes"
    let title = "Pushes"
    let caption = "Sent through the platform (lost, dropped in an outage, delivered twice), and on arrival: woke a suspended or OS-killed app for a background window, found it running, or found it swiped away or the phone off."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        let stacks = Set(results.metrics(named: "push.notifications").compactMap { $0.label("stack") }).sorted()
        guard !stacks.isEmpty else { return nil }
        let outcomes = ["sent", "lost", "outage", "duplicate", "woke", "running", "not_running"]
        let rows = stacks.map { stack in
            [stack] + outcomes.map { MetricUnit.decimal(results.total("push.notifications", labels: "outcome=\($0),stack=\(stack)") ?? 0, digits: 0) }
        }
        return HTML.table(headers: ["stack"] + outcomes.map { String($0.map { $0 == "_" ? " " : $0 }) }, rows: rows, numericColumns: Set(1...outcomes.count))
    }
}

/// A server's worker pool: utilisation and the queue in front of it.
struct ServerLoadPanel: DashboardPanel {
    let id: String
    let title: String
    /// The metric prefix: `sync` or `chat`.
    let stack: String
    let caption = "Worker utilisation per bucket and requests waiting for a worker at each bucket end."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard let utilisation = results.metric(named: "\(stack).server_utilisation"),
              let queue = results.metric(named: "\(stack).server_queue") else { return nil }
        let busy = TimeChart.Line(name: "utilisation %", color: Palette.series[0], points: atEnds(context, context.values(results, utilisation)))
        let waiting = TimeChart.Line(name: "queue length", color: Palette.series[3], points: atEnds(context, context.values(results, queue)))
        var wait = ""
        if let metric = results.metric(named: "\(stack).server_wait") {
            let h = results.histogram(metric)
            wait = "<p class=\"caption\">Wait for a worker: p50 \(durationPercentiles(h)[0]), p90 \(durationPercentiles(h)[1]), p99 \(durationPercentiles(h)[2]).</p>"
        }
        return context.timeChart { MetricUnit.decimal($0, digits: 1) }.lines([busy]) + HTML.legend([(busy.name, busy.color)])
            + context.timeChart { MetricUnit.decimal($0, digits: 0) }.lines([waiting]) + HTML.legend([(waiting.name, waiting.color)]) + wait
    }
}
