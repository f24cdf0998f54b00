import Foundation
import LabKernel
import LabStore

/// Latency by percentile, HdrHistogram's plot: the x axis counts nines (p90, p99, p99.9,
/// p99.99 equally spaced) so the tail gets the room it matters for; one line per run.
/// One inline `<svg>`; hovering a point shows its value.
struct PercentileChart {
    struct Line {
        var name: String
        var color: String
        var histogram: LogLinearHistogram
        var dashed = false
    }

    var width = 640.0
    var height = 220.0
    let left = 64.0, right = 22.0, top = 12.0, bottom = 28.0
    static let percentiles: [Double] = [0, 25, 50, 75, 90, 95, 97.5, 99, 99.5, 99.75, 99.9, 99.95, 99.99]

    /// Nines of a percentile: 0 at p0, 1 at p90, 2 at p99, 3 at p99.9.
    static func nines(_ percentile: Double) -> Double { -log10(max(1e-4, 1 - percentile / 100)) }

    func render(_ lines: [Line]) -> String {
        let maxValue = lines.flatMap { line in Self.percentiles.map { Double(line.histogram.value(atPercentile: $0)) } }.max() ?? 0
        let yMax = Ticks.niceMax(maxValue)
        let x = LinearScale(domain: (0, Self.nines(99.99)), range: (left, width - right))
        let y = LinearScale(domain: (0, yMax), range: (height - bottom, top))
        var body = Ticks.valueGrid(y: y, yMax: yMax, left: left, right: width - right, format: { MetricUnit.formatDuration($0) })
        for (label, percentile) in [("p0", 0.0), ("p90", 90), ("p99", 99), ("p99.9", 99.9), ("p99.99", 99.99)] {
            let xx = fmt(x(Self.nines(percentile)))
            body += "<line x1=\"\(xx)\" x2=\"\(xx)\" y1=\"\(fmt(top))\" y2=\"\(fmt(height - bottom + 4))\" class=\"grid\"/>"
            body += "<text x=\"\(xx)\" y=\"\(fmt(height - 9))\" class=\"xlabel\">\(label)</text>"
        }
        body += "<line x1=\"\(fmt(left))\" x2=\"\(fmt(width - right))\" y1=\"\(fmt(height - bottom))\" y2=\"\(fmt(height - bottom))\" class=\"axis\"/>"
        for line in lines {
            let points = Self.percentiles.map { (percentile: $0, value: Double(line.histogram.value(atPercentile: $0))) }
            let coords = points.map { "\(fmt(x(Self.nines($0.percentile)))),\(fmt(y($0.value)))" }.joined(separator: " ")
            let dash = line.dashed ? " stroke-dasharray=\"6 4\"" : ""
            body += "<polyline points=\"\(coords)\" fill=\"none\" stroke=\"\(line.color)\" stroke-width=\"2\"\(dash)/>"
            for p in points {
                body += "<circle cx=\"\(fmt(x(Self.nines(p.percentile))))\" cy=\"\(fmt(y(p.value)))\" r=\"2.5\" fill=\"\(line.color)\">"
                    + "<title>\(HTML.escape(line.name)) p\(MetricUnit.decimal(p.percentile, digits: p.percentile == p.percentile.rounded() ? 0 : 2)): "
                    + "\(HTML.escape(MetricUnit.formatDuration(p.value)))</title></circle>"
            }
        }
        return "<svg viewBox=\"0 0 \(fmt(width)) \(fmt(height))\" class=\"chart\" role=\"img\">\(body)</svg>"
    }
}
