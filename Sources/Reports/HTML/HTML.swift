/// Minimal HTML building: escaping and a few elements. Every dynamic string that reaches
/// the page goes through `escape`, including scenario text and event details.
enum HTML {
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for ch in text {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(ch)
            }
        }
        return out
    }

    static func table(headers: [String], rows: [[String]], numericColumns: Set<Int> = [], rowClasses: [String] = []) -> String {
        var html = "<table><thead><tr>"
        for (i, header) in headers.enumerated() {
            html += numericColumns.contains(i) ? "<th class=\"num\">\(escape(header))</th>" : "<th>\(escape(header))</th>"
        }
        html += "</tr></thead><tbody>"
        for (r, row) in rows.enumerated() {
            let cls = r < rowClasses.count && !rowClasses[r].isEmpty ? " class=\"\(rowClasses[r])\"" : ""
            html += "<tr\(cls)>"
            for (i, cell) in row.enumerated() {
                html += numericColumns.contains(i) ? "<td class=\"num\">\(cell)</td>" : "<td>\(cell)</td>"
            }
            html += "</tr>"
        }
        return html + "</tbody></table>"
    }

    static func legend(_ items: [(name: String, color: String)]) -> String {
        "<div class=\"legend\">" + items.map {
            "<span><i style=\"background:\($0.color)\"></i>\(escape($0.name))</span>"
        }.joined() + "</div>"
    }
}

/// The dashboard's colours, one per domain value, so a state has the same colour everywhere.
enum Palette {
    static let powerStates = ["#2e9d5b", "#3b7dd8", "#e0a526", "#d64545"]  // Charging, Unplugged, Low, Critical
    static let appStates = ["#3b7dd8", "#8fb3e8", "#b9b9c3", "#4a4a55"]     // foreground, background, killed, off
    static let networks = ["#2e9d5b", "#7a5cc7", "#d64545"]                // wifi, cellular, offline
    static let series = ["#3b7dd8", "#e07b26", "#2e9d5b", "#d64545", "#7a5cc7", "#1f9aa5", "#b5539c", "#6d6d78"]
    static let executed = "#3b7dd8"
    static let fastForwarded = "#a9c6ef"
}
