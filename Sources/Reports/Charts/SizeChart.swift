import Foundation
import LabKernel
import LabStore

/// Values against fleet size: a log-scaled device axis (sweep points grow by factors),
/// lines with a marker per point, and optional horizontal bounds (a latency budget, 100 %
/// utilisation). One inline `<svg>`; hovering a point shows its value.
struct SizeChart {
    struct Line {
        var name: String
        var color: String
        var points: [(devices: Int, value: Double)]
    }

    var sizes: [Int]
    var format: (Double) -> String
    /// Horizontal lines: a bound's value and its label.
    var bounds: [(value: Double, label: String)] = []
    var width = 640.0
    var height = 240.0
    let left = 64.0, right = 22.0, top = 12.0, bottom = 28.0

    func render(_ lines: [Line]) -> String {
        let maxValue = max(lines.flatMap { $0.points.map(\.value) }.max() ?? 0, bounds.map(\.value).max() ?? 0)
        let yMax = Ticks.niceMax(maxValue)
        let low = Double(max(1, sizes.min() ?? 1)), high = Double(max(sizes.max() ?? 1, Int(low) + 1))
        let x = LinearScale(domain: (log(low), log(high)), range: (left, width - right))
        let y = LinearScale(domain: (0, yMax), range: (height - bottom, top))
        var body = Ticks.valueGrid(y: y, yMax: yMax, left: left, right: width - right, format: format)
        for size in sizes {
            let xx = fmt(x(log(Double(max(1, size)))))
            body += "<line x1=\"\(xx)\" x2=\"\(xx)\" y1=\"\(fmt(height - bottom))\" y2=\"\(fmt(height - bottom + 4))\" class=\"axis\"/>"
            body += "<text x=\"\(xx)\" y=\"\(fmt(height - 9))\" class=\"xlabel\">\(MetricUnit.decimal(Double(size), digits: 0))</text>"
        }
        body += "<line x1=\"\(fmt(left))\" x2=\"\(fmt(width - right))\" y1=\"\(fmt(height - bottom))\" y2=\"\(fmt(height - bottom))\" class=\"axis\"/>"
        for bound in bounds {
            let yy = fmt(y(bound.value))
            body += "<line x1=\"\(fmt(left))\" x2=\"\(fmt(width - right))\" y1=\"\(yy)\" y2=\"\(yy)\" stroke=\"#d64545\" stroke-dasharray=\"6 4\"/>"
            body += "<text x=\"\(fmt(width - right - 4))\" y=\"\(fmt(y(bound.value) - 5))\" class=\"xlabel\" style=\"text-anchor:end;fill:#a33\">\(HTML.escape(bound.label))</text>"
        }
        for line in lines where !line.points.isEmpty {
            let coords = line.points.map { "\(fmt(x(log(Double(max(1, $0.devices)))))),\(fmt(y($0.value)))" }.joined(separator: " ")
            body += "<polyline points=\"\(coords)\" fill=\"none\" stroke=\"\(line.color)\" stroke-width=\"1.8\"/>"
            for p in line.points {
                body += "<circle cx=\"\(fmt(x(log(Double(max(1, p.devices))))))\" cy=\"\(fmt(y(p.value)))\" r=\"3.5\" fill=\"\(line.color)\">"
                    + "<title>\(HTML.escape(line.name)) at \(MetricUnit.decimal(Double(p.devices), digits: 0)) devices: \(HTML.escape(format(p.value)))</title></circle>"
            }
        }
        return "<svg viewBox=\"0 0 \(fmt(width)) \(fmt(height))\" class=\"chart\" role=\"img\">\(body)</svg>"
    }
}
