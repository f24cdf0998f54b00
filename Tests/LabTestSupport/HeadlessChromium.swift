public import Foundation

/// Debian's headless Chromium, driven for dashboard tests.
///
/// A page is loaded with every host name resolving to nothing and Chromium's own
/// background traffic switched off, while a NetLog records the network stack. Requests the
/// page itself starts carry the page's (opaque, "null") origin as initiator, so they can
/// be told apart from the browser's housekeeping. A self-contained page makes none.
public enum HeadlessChromium {
    public struct Load {
        /// URLs the page tried to fetch over the network (all of them fail offline).
        public var pageRequests: [String]
        public var screenshot: Data?
        public var exitStatus: Int32
    }

    public enum Failure: Error, CustomStringConvertible {
        case notInstalled
        case noNetLog(String)
        public var description: String {
            switch self {
            case .notInstalled:
                return "headless Chromium is needed: apt-get install -y chromium (or set CHROMIUM to its path)"
            case .noNetLog(let output): return "Chromium wrote no NetLog; its output was:\n\(output)"
            }
        }
    }

    public static var executable: String? {
        if let path = ProcessInfo.processInfo.environment["CHROMIUM"], FileManager.default.isExecutableFile(atPath: path) { return path }
        for path in ["/usr/bin/chromium", "/usr/bin/chromium-headless-shell", "/usr/bin/chromium-browser"]
        where FileManager.default.isExecutableFile(atPath: path) {
            return path
        }
        return nil
    }

    /// Loads `file`, takes a screenshot of `width`×`height` and reports the page's requests.
    public static func load(file: URL, width: Int = 1400, height: Int = 3000) throws -> Load {
        guard let chromium = executable else { throw Failure.notInstalled }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("chromium-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let netLog = scratch.appendingPathComponent("net.json")
        let png = scratch.appendingPathComponent("shot.png")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: chromium)
        process.arguments = [
            "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
            "--user-data-dir=\(scratch.appendingPathComponent("profile").path)",
            "--host-resolver-rules=MAP * ~NOTFOUND", "--log-net-log=\(netLog.path)",
            "--window-size=\(width),\(height)", "--screenshot=\(png.path)", file.absoluteString,
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard let data = FileManager.default.contents(atPath: netLog.path) else { throw Failure.noNetLog(text) }
        return Load(pageRequests: try pageRequests(netLog: data), screenshot: FileManager.default.contents(atPath: png.path),
                    exitStatus: process.terminationStatus)
    }

    static func pageRequests(netLog: Data) throws -> [String] {
        // Chromium may leave the final "]}" off when it exits quickly.
        var data = netLog
        if (try? JSONSerialization.jsonObject(with: data)) == nil { data.append(contentsOf: Array("]}".utf8)) }
        guard let log = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              let constants = log["constants"] as? [String: Any],
              let eventTypes = constants["logEventTypes"] as? [String: Int],
              let startJob = eventTypes["URL_REQUEST_START_JOB"],
              let events = log["events"] as? [[String: Any]] else { return [] }
        return events.compactMap { event in
            guard event["type"] as? Int == startJob, let params = event["params"] as? [String: Any],
                  let url = params["url"] as? String, let initiator = params["initiator"] as? String,
                  initiator != "not an origin" else { return nil }
            return url
        }
    }
}
