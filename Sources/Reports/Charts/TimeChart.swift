import LabKernel

/// A chart of values over run time: lines, a shaded band, or stacked areas.
///
/// Drawn as one inline `<svg>` with a fixed viewBox that scales with the page. Hovering a
/// point shows its value through SVG `<title>`, so the page needs no script.
struct TimeChart {
    struct Line {
        var name: String
        var color: String
        var points: [(t: Int64, value: Double)]
        var dashed = false
    }

    struct Band {
        var name: String
        var color: String
        var points: [(t: Int64, low: Double, high: Double)]
    }

    struct Layer {
        var name: String
        var color: String
        var values: [Double]
    }

    /// A stretch of time shaded behind the data (a fault in force).
    struct Window {
        var name: String
        var from: Int64
        var to: Int64
    }

    var duration: Int64
    var labeler: TimeLabeler
    var format: (Double) -> String
    var windows: [Window] = []
    var width = 640.0
    var height = 230.0
    var yMaxOverride: Double?

    let left = 56.0, right = 22.0, top = 10.0, bottom = 26.0

    /// Lines (and optional bands under them).
    func lines(_ lines: [Line], bands: [Band] = []) -> String {
        let maxValue = max(lines.flatMap { $0.points.map(\.value) }.max() ?? 0,
                           bands.flatMap { $0.points.map(\.high) }.max() ?? 0)
        let (x, y, frame) = axes(yMax: yMaxOverride ?? Ticks.niceMax(maxValue))
        var body = frame
        for band in bands where !band.points.isEmpty {
            let upper = band.points.map { "\(fmt(x(Double($0.t)))),\(fmt(y($0.high)))" }
            let lower = band.points.reversed().map { "\(fmt(x(Double($0.t)))),\(fmt(y($0.low)))" }
            body += "<polygon points=\"\((upper + lower).joined(separator: " "))\" fill=\"\(band.color)\" fill-opacity=\"0.22\" stroke=\"none\"/>"
        }
        for line in lines where !line.points.isEmpty {
            let coords = line.points.map { "\(fmt(x(Double($0.t)))),\(fmt(y($0.value)))" }.joined(separator: " ")
            let dash = line.dashed ? " stroke-dasharray=\"5 4\"" : ""
            body += "<polyline points=\"\(coords)\" fill=\"none\" stroke=\"\(line.color)\" stroke-width=\"1.8\"\(dash)/>"
            if line.points.count <= 400 {
                for p in line.points {
                    body += "<circle cx=\"\(fmt(x(Double(p.t))))\" cy=\"\(fmt(y(p.value)))\" r=\"5\" fill=\"transparent\">"
                        + "<title>\(HTML.escape(line.name)) at \(labeler.label(p.t)): \(HTML.escape(format(p.value)))</title></circle>"
                }
            }
        }
        return svg(body)
    }

    /// Stacked areas over bucket starts `ts`; each layer has one value per bucket.
    func stacked(_ layers: [Layer], ts: [Int64], bucket: Int64) -> String {
        guard !ts.isEmpty else { return svg("") }
        var cumulative = [Double](repeating: 0, count: ts.count)
        var tops: [[Double]] = []
        for layer in layers {
            for i in ts.indices { cumulative[i] += i < layer.values.count ? layer.values[i] : 0 }
            tops.append(cumulative)
        }
        let (x, y, frame) = axes(yMax: yMaxOverride ?? Ticks.niceMax(cumulative.max() ?? 0))
        var body = frame
        var below = [Double](repeating: 0, count: ts.count)
        for (index, layer) in layers.enumerated() {
            let top = tops[index]
            // Each bucket's value holds from its start to its end: draw steps.
            var upper: [String] = [], lower: [String] = []
            for i in ts.indices {
                let x0 = x(Double(ts[i])), x1 = x(Double(min(ts[i] + bucket, duration)))
                upper += ["\(fmt(x0)),\(fmt(y(top[i])))", "\(fmt(x1)),\(fmt(y(top[i])))"]
                lower += ["\(fmt(x0)),\(fmt(y(below[i])))", "\(fmt(x1)),\(fmt(y(below[i])))"]
            }
            body += "<polygon points=\"\((upper + lower.reversed()).joined(separator: " "))\" fill=\"\(layer.color)\" fill-opacity=\"0.85\" stroke=\"none\">"
                + "<title>\(HTML.escape(layer.name))</title></polygon>"
            below = top
        }
        return svg(body)
    }

    /// Frame, grid and axis labels; returns the scales.
    private func axes(yMax: Double) -> (LinearScale, LinearScale, String) {
        let x = LinearScale(domain: (0, Double(max(duration, 1))), range: (left, width - right))
        let y = LinearScale(domain: (0, yMax), range: (height - bottom, top))
        var frame = ""
        var ticks = Ticks.nice(0, yMax)
        // A count axis up to 1 would read "0 0 0 1 1 1": keep the whole numbers then.
        if Set(ticks.map(format)).count < ticks.count { ticks = ticks.filter { $0 == $0.rounded() } }
        for tick in ticks {
            let yy = fmt(y(tick))
            frame += "<line x1=\"\(fmt(left))\" x2=\"\(fmt(width - right))\" y1=\"\(yy)\" y2=\"\(yy)\" class=\"grid\"/>"
            frame += "<text x=\"\(fmt(left - 6))\" y=\"\(yy)\" class=\"ylabel\">\(HTML.escape(format(tick)))</text>"
        }
        for t in Ticks.time(durationNanoseconds: duration) {
            let xx = fmt(x(Double(t)))
            frame += "<line x1=\"\(xx)\" x2=\"\(xx)\" y1=\"\(fmt(height - bottom))\" y2=\"\(fmt(height - bottom + 4))\" class=\"axis\"/>"
            frame += "<text x=\"\(xx)\" y=\"\(fmt(height - 8))\" class=\"xlabel\">\(labeler.label(t))</text>"
        }
        frame += "<line x1=\"\(fmt(left))\" x2=\"\(fmt(width - right))\" y1=\"\(fmt(height - bottom))\" y2=\"\(fmt(height - bottom))\" class=\"axis\"/>"
        // Labels of windows that start close together go on rows below each other.
        var rowEnds: [Double] = []
        for window in windows.sorted(by: { ($0.from, $0.name) < ($1.from, $1.name) }) {
            let x0 = x(Double(window.from)), x1 = max(x(Double(window.to)), x0 + 2)
            let labelWidth = Double(window.name.count) * 5.6 + 6
            let row = rowEnds.firstIndex { x0 >= $0 } ?? rowEnds.count
            if row == rowEnds.count { rowEnds.append(0) }
            rowEnds[row] = x0 + labelWidth
            frame += "<rect x=\"\(fmt(x0))\" y=\"\(fmt(top))\" width=\"\(fmt(x1 - x0))\" height=\"\(fmt(height - bottom - top))\" "
                + "fill=\"#d64545\" fill-opacity=\"0.10\"><title>\(HTML.escape(window.name)) \(labeler.label(window.from))–\(labeler.label(window.to))</title></rect>"
            frame += "<text x=\"\(fmt(x0 + 3))\" y=\"\(fmt(top + 10 + 11 * Double(row)))\" class=\"xlabel\" text-anchor=\"start\" fill=\"#a33\">\(HTML.escape(window.name))</text>"
        }
        return (x, y, frame)
    }

    private func svg(_ body: String) -> String {
        "<svg viewBox=\"0 0 \(fmt(width)) \(fmt(height))\" class=\"chart\" role=\"img\">\(body)</svg>"
    }
}

/// Horizontal or grouped bars.
struct BarChart {
    struct Group {
        var label: String
        var bars: [(name: String, color: String, value: Double)]
    }

    var format: (Double) -> String
    var width = 640.0

    /// Groups of stacked horizontal bars, one row per group.
    func stackedRows(_ groups: [Group]) -> String {
        let rowHeight = 26.0, labelWidth = 130.0, valueWidth = 90.0
        let height = Double(groups.count) * rowHeight + 8
        let maxTotal = max(groups.map { $0.bars.reduce(0) { $0 + $1.value } }.max() ?? 0, 1e-12)
        let scale = LinearScale(domain: (0, maxTotal), range: (0, width - labelWidth - valueWidth - 8))
        var body = ""
        for (row, group) in groups.enumerated() {
            let y = 4 + Double(row) * rowHeight
            body += "<text x=\"\(fmt(labelWidth - 8))\" y=\"\(fmt(y + rowHeight / 2))\" class=\"ylabel\">\(HTML.escape(group.label))</text>"
            var x = labelWidth
            var total = 0.0
            for bar in group.bars {
                let w = scale(bar.value)
                if w > 0 {
                    body += "<rect x=\"\(fmt(x))\" y=\"\(fmt(y + 4))\" width=\"\(fmt(w))\" height=\"\(fmt(rowHeight - 8))\" fill=\"\(bar.color)\">"
                        + "<title>\(HTML.escape(group.label)), \(HTML.escape(bar.name)): \(HTML.escape(format(bar.value)))</title></rect>"
                }
                x += w
                total += bar.value
            }
            body += "<text x=\"\(fmt(x + 6))\" y=\"\(fmt(y + rowHeight / 2))\" class=\"vlabel\">\(HTML.escape(format(total)))</text>"
        }
        return "<svg viewBox=\"0 0 \(fmt(width)) \(fmt(height))\" class=\"chart\" role=\"img\">\(body)</svg>"
    }
}

/// Two decimals are plenty for coordinates in a 640-wide viewBox.
func fmt(_ value: Double) -> String {
    guard value.isFinite else { return "0" }
    let scaled = (value * 100).rounded() / 100
    if scaled == scaled.rounded() { return String(Int64(scaled)) }
    return String(scaled)
}
