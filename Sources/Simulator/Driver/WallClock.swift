import Foundation

/// The only place the simulator reads real time: progress, ETA and the wall-time facts in
/// the run metadata. Nothing read here may influence simulated results.
public enum WallClock {
    /// Monotonic seconds since an arbitrary origin.
    public static func seconds() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds) / 1e9
    }

    /// The current UTC date and time in ISO 8601, for run metadata.
    public static func timestamp() -> String {
        ISO8601DateFormatter().string(from: Date())
    }

    /// CPU time this process has used, user and system, every thread (seconds).
    public static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// Peak resident set size of this process in bytes (Linux VmHWM), or nil if unknown.
    public static func peakResidentBytes() -> Int? {
        statusField("VmHWM:")
    }

    /// Current resident set size in bytes (Linux VmRSS), or nil if unknown.
    public static func residentBytes() -> Int? {
        statusField("VmRSS:")
    }

    private static func statusField(_ name: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(name) {
            let digits = line.dropFirst(name.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Int($0) }
            return digits.map { $0 * 1024 }
        }
        return nil
    }
}
