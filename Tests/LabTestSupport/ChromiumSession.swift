public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Headless Chromium driven over the DevTools protocol on a pipe
/// (`--remote-debugging-pipe`: commands on fd 3, replies on fd 4, NUL-separated JSON), so
/// a test can click in a page like a person would, with no WebSocket client or driver
/// package. One page, one session.
public final class ChromiumSession {
    public enum Failure: Error, CustomStringConvertible {
        case notInstalled, spawn(Int32), closed, timeout(String), protocolError(String)
        public var description: String {
            switch self {
            case .notInstalled: return "headless Chromium is needed: apt-get install -y chromium (or set CHROMIUM)"
            case .spawn(let code): return "could not start Chromium (errno \(code))"
            case .closed: return "Chromium closed the DevTools pipe"
            case .timeout(let what): return "timed out waiting for \(what)"
            case .protocolError(let message): return "DevTools error: \(message)"
            }
        }
    }

    let pid: pid_t
    let writeFD: Int32
    let readFD: Int32
    var buffer: [UInt8] = []
    var nextID = 1
    var sessionID = ""
    let profile: URL

    /// Starts Chromium and opens `url` in a new page.
    public init(url: String, width: Int = 1400, height: Int = 1800) throws {
        guard let chromium = HeadlessChromium.executable else { throw Failure.notInstalled }
        profile = FileManager.default.temporaryDirectory.appendingPathComponent("cdp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: profile, withIntermediateDirectories: true)
        var toChrome: [Int32] = [0, 0], fromChrome: [Int32] = [0, 0]
        guard pipe(&toChrome) == 0, pipe(&fromChrome) == 0 else { throw Failure.spawn(errno) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChrome[0], 3)
        posix_spawn_file_actions_adddup2(&actions, fromChrome[1], 4)
        let devNull = open("/dev/null", O_WRONLY)
        posix_spawn_file_actions_adddup2(&actions, devNull, 1)
        posix_spawn_file_actions_adddup2(&actions, devNull, 2)
        let arguments = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-pipe",
                         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
                         "--user-data-dir=\(profile.path)", "--window-size=\(width),\(height)", "about:blank"]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, chromium, &actions, nil, &argv, environ)
        close(toChrome[0])
        close(fromChrome[1])
        close(devNull)
        guard status == 0 else { throw Failure.spawn(status) }
        pid = child
        writeFD = toChrome[1]
        readFD = fromChrome[0]
        // The first answer waits for the browser to start. On a cold machine, with the rest
        // of the suite using both cores, that alone took over 20 s once in CI, so the
        // start gets its own, longer allowance; every later command keeps the default.
        let target = try send("Target.createTarget", ["url": url], timeout: 90)
        guard let targetID = target["targetId"] as? String else { throw Failure.protocolError("no target id") }
        let attached = try send("Target.attachToTarget", ["targetId": targetID, "flatten": true])
        guard let session = attached["sessionId"] as? String else { throw Failure.protocolError("no session id") }
        sessionID = session
    }

    deinit {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        close(writeFD)
        close(readFD)
        try? FileManager.default.removeItem(at: profile)
    }

    /// Sends a command (to the page once attached) and returns its result.
    @discardableResult
    public func send(_ method: String, _ params: [String: Any] = [:], timeout: TimeInterval = 20) throws -> [String: Any] {
        let id = nextID
        nextID += 1
        var message: [String: Any] = ["id": id, "method": method, "params": params]
        if !sessionID.isEmpty { message["sessionId"] = sessionID }
        var bytes = [UInt8](try JSONSerialization.data(withJSONObject: message))
        bytes.append(0)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(writeFD, $0.baseAddress, $0.count) }
            guard written > 0 else { throw Failure.closed }
            offset += written
        }
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            while let end = buffer.firstIndex(of: 0) {
                let frame = Data(buffer[..<end])
                buffer.removeSubrange(...end)
                guard let reply = try JSONSerialization.jsonObject(with: frame) as? [String: Any], reply["id"] as? Int == id else { continue }
                if let error = reply["error"] as? [String: Any] { throw Failure.protocolError("\(method): \(error["message"] ?? error)") }
                return reply["result"] as? [String: Any] ?? [:]
            }
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { throw Failure.timeout(method) }
            var poller = pollfd(fd: readFD, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(min(remaining, 1) * 1000)) >= 0 else { throw Failure.closed }
            guard poller.revents != 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let count = read(readFD, &chunk, chunk.count)
            guard count > 0 else { throw Failure.closed }
            buffer += chunk[..<count]
        }
    }

    /// Evaluates JavaScript in the page and returns its value.
    public func evaluate(_ expression: String) throws -> Any? {
        let result = try send("Runtime.evaluate", ["expression": expression, "returnByValue": true, "awaitPromise": true])
        if let exception = result["exceptionDetails"] { throw Failure.protocolError("script failed: \(exception)") }
        return (result["result"] as? [String: Any])?["value"]
    }

    /// Polls `expression` until it is true.
    public func wait(until expression: String, timeout: TimeInterval = 20) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if (try? evaluate(expression)) as? Bool == true { return }
            usleep(100_000)
        }
        throw Failure.timeout(expression)
    }

    /// Clicks the middle of the first element matching `selector` with real mouse events.
    public func click(_ selector: String) throws {
        let quoted = String(decoding: try JSONSerialization.data(withJSONObject: [selector]), as: UTF8.self)
        guard let box = try evaluate("""
            (() => { const e = document.querySelector(\(quoted)[0]); if (!e) return null; e.scrollIntoView({block: "center"});
                     const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()
            """) as? [Double], box.count == 2 else { throw Failure.protocolError("nothing matches \(selector)") }
        for type in ["mouseMoved", "mousePressed", "mouseReleased"] {
            try send("Input.dispatchMouseEvent", ["type": type, "x": box[0], "y": box[1], "button": "left", "clickCount": 1])
        }
    }

    /// A PNG of the page as it is drawn now.
    public func screenshot() throws -> Data {
        let result = try send("Page.captureScreenshot", ["format": "png", "captureBeyondViewport": true])
        return Data(base64Encoded: result["data"] as? String ?? "") ?? Data()
    }

    /// Types into the focused element.
    public func type(_ text: String, into selector: String) throws {
        let quoted = String(decoding: try JSONSerialization.data(withJSONObject: [selector, text]), as: UTF8.self)
        _ = try evaluate("(() => { const a = \(quoted); const e = document.querySelector(a[0]); e.focus(); e.value = ''; return true; })()")
        try send("Input.insertText", ["text": text])
    }
}
