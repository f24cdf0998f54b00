import LabKernel

/// Axis arithmetic shared by every chart: linear scales and "nice" tick values.
struct LinearScale {
    var domain: (Double, Double)
    var range: (Double, Double)

    func callAsFunction(_ value: Double) -> Double {
        let span = domain.1 - domain.0
        guard span != 0 else { return (range.0 + range.1) / 2 }
        return range.0 + (value - domain.0) / span * (range.1 - range.0)
    }
}

enum Ticks {
    /// Round values covering [low, high] with about `target` steps (1, 2, 5 × 10^k).
    static func nice(_ low: Double, _ high: Double, target: Int = 5) -> [Double] {
        guard high > low, high.isFinite, low.isFinite else { return [low] }
        let raw = (high - low) / Double(target)
        var magnitude = 1.0
        while magnitude * 10 <= raw { magnitude *= 10 }
        while magnitude > raw { magnitude /= 10 }
        let step = [1.0, 2, 5, 10].map { $0 * magnitude }.first { $0 >= raw } ?? magnitude * 10
        var ticks: [Double] = []
        var value = (low / step).rounded(.down) * step
        while value <= high + step * 1e-9 {
            if value >= low - step * 1e-9 { ticks.append(value) }
            value += step
        }
        return ticks
    }

    /// Horizontal grid lines with their labels at the nice ticks of [0, yMax], the value
    /// axis every chart with a zero baseline draws.
    static func valueGrid(y: LinearScale, yMax: Double, left: Double, right: Double, format: (Double) -> String) -> String {
        var svg = ""
        for tick in nice(0, yMax) {
            let yy = fmt(y(tick))
            svg += "<line x1=\"\(fmt(left))\" x2=\"\(fmt(right))\" y1=\"\(yy)\" y2=\"\(yy)\" class=\"grid\"/>"
            svg += "<text x=\"\(fmt(left - 6))\" y=\"\(yy)\" class=\"ylabel\">\(HTML.escape(format(tick)))</text>"
        }
        return svg
    }

    /// An upper bound for a value axis: the first nice tick at or above `max`.
    static func niceMax(_ max: Double) -> Double {
        guard max > 0, max.isFinite else { return 1 }
        let ticks = nice(0, max)
        guard ticks.count >= 2 else { return max }
        let step = ticks[1] - ticks[0]
        return (max / step).rounded(.up) * step
    }

    /// Time ticks in run nanoseconds at round steps of wall time.
    static func time(durationNanoseconds: Int64, target: Int = 7) -> [Int64] {
        let steps: [TimeSpan] = [.seconds(1), .seconds(10), .seconds(30), .minutes(1), .minutes(5), .minutes(10), .minutes(15),
                                 .minutes(30), .hours(1), .hours(2), .hours(3), .hours(6), .hours(12), .days(1), .days(2), .days(7)]
        let step = steps.first { durationNanoseconds / $0.nanoseconds <= Int64(target) } ?? .days(30)
        return stride(from: Int64(0), through: durationNanoseconds, by: Int(step.nanoseconds)).map { $0 }
    }
}

/// How the time axis is labelled: time of day when the run has one, else elapsed time.
struct TimeLabeler {
    var startTimeOfDay: Int64

    func label(_ t: Int64) -> String {
        let day: Int64 = 86_400_000_000_000
        let tod = (startTimeOfDay + t) % day
        let minutes = tod / 60_000_000_000
        let h = minutes / 60, m = minutes % 60
        let dayIndex = (startTimeOfDay + t) / day
        var text = (h < 10 ? "0" : "") + "\(h):" + (m < 10 ? "0" : "") + "\(m)"
        // Off the minute (a load test starts when it starts, and ticks every few seconds):
        // seconds too, or neighbouring labels would read the same.
        let second = tod / 1_000_000_000 % 60
        if tod % 60_000_000_000 != 0 { text += ":" + (second < 10 ? "0" : "") + "\(second)" }
        return dayIndex > 0 && tod == 0 ? "day \(dayIndex + 1)" : text
    }
}
