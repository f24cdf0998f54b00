/// Wall-clock time as Unix milliseconds, formatted without Foundation.
///
/// Cores never read the wall clock: a driver supplies the Unix time of `Instant.zero`
/// (the simulator a fixed date from the scenario, the live driver the real one), and a
/// core's wall time is that origin plus `now`. Deterministic and skewable per device.
public struct WallClockOrigin: Hashable, Sendable {
    /// Unix milliseconds at `Instant.zero`.
    public var unixMilliseconds: Int64

    public init(unixMilliseconds: Int64) { self.unixMilliseconds = unixMilliseconds }

    /// 2026-01-01T00:00:00Z, the default origin of simulations.
    public static let simulationEpoch = WallClockOrigin(unixMilliseconds: 1_767_225_600_000)
    /// The Unix epoch: live drivers' instants are nanoseconds since it, so an instant a
    /// server stored means the same moment after a restart.
    public static let unixEpoch = WallClockOrigin(unixMilliseconds: 0)

    public func unixMilliseconds(at instant: Instant) -> Int64 {
        TimeSpan.saturating(unixMilliseconds, plus: instant.nanoseconds / 1_000_000)
    }

    /// The instant of a wall-clock time (a client's `before=` date, say). Saturates far
    /// outside the ±292 years an instant spans, so any parsed date compares sensibly.
    public func instant(atUnixMilliseconds ms: Int64) -> Instant {
        let (offset, overflow) = ms.subtractingReportingOverflow(unixMilliseconds)
        guard !overflow else { return ms > unixMilliseconds ? .distantFuture : Instant(nanoseconds: .min) }
        return Instant(nanoseconds: TimeSpan.saturating(offset, times: 1_000_000))
    }

    /// RFC 3339 in UTC with milliseconds: `2026-01-01T08:00:00.000Z`.
    public func rfc3339(at instant: Instant) -> String {
        RFC3339.format(unixMilliseconds: unixMilliseconds(at: instant))
    }
}

public enum RFC3339 {
    public static func format(unixMilliseconds ms: Int64) -> String {
        let days = floorDivide(ms, 86_400_000)
        let millisOfDay = ms - days * 86_400_000
        let (y, m, d) = civil(fromDays: days)
        let h = millisOfDay / 3_600_000, min = millisOfDay / 60_000 % 60, s = millisOfDay / 1000 % 60, milli = millisOfDay % 1000
        guard (0...9999).contains(y) else {
            return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(h, 2)):\(pad(min, 2)):\(pad(s, 2)).\(pad(milli, 3))Z"
        }
        // Written digit by digit into the string's storage: stamps are made on hot paths
        // (handler outputs, telemetry, timelines), and interpolation costs ten times more.
        return String(unsafeUninitializedCapacity: 24) { out in
            var position = 0
            func put(_ value: Int64, _ width: Int) {
                var rest = value
                for offset in stride(from: width - 1, through: 0, by: -1) {
                    out[position + offset] = UInt8(truncatingIfNeeded: 48 + rest % 10)
                    rest /= 10
                }
                position += width
            }
            func mark(_ ascii: Unicode.Scalar) {
                out[position] = UInt8(ascii: ascii)
                position += 1
            }
            put(y, 4); mark("-"); put(m, 2); mark("-"); put(d, 2); mark("T")
            put(h, 2); mark(":"); put(min, 2); mark(":"); put(s, 2); mark("."); put(milli, 3); mark("Z")
            return position
        }
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)` to Unix milliseconds.
    public static func parse(_ text: String) -> Int64? {
        let c = Array(text.utf8)
        func num(_ from: Int, _ count: Int) -> Int64? {
            guard from + count <= c.count else { return nil }
            var v: Int64 = 0
            for b in c[from..<from + count] {
                guard b >= 48 && b <= 57 else { return nil }
                v = v * 10 + Int64(b - 48)
            }
            return v
        }
        guard c.count >= 20, c[4] == 45, c[7] == 45, c[10] == 84 || c[10] == 116, c[13] == 58, c[16] == 58,
              let y = num(0, 4), let mo = num(5, 2), let d = num(8, 2), let h = num(11, 2), let mi = num(14, 2), let s = num(17, 2),
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61 else { return nil }
        var i = 19
        var millis: Int64 = 0
        if i < c.count, c[i] == 46 {
            i += 1
            var digits = 0
            while i < c.count, c[i] >= 48 && c[i] <= 57 {
                if digits < 3 { millis = millis * 10 + Int64(c[i] - 48) }
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            // Fewer than three digits are scaled up; more are cut (a range `digits..<3`
            // with `digits` over 3 would trap before any `where` is checked).
            var scaled = digits
            while scaled < 3 {
                millis *= 10
                scaled += 1
            }
        }
        var offset: Int64 = 0
        guard i < c.count else { return nil }
        if c[i] == 90 || c[i] == 122 {
            i += 1
        } else if c[i] == 43 || c[i] == 45, let oh = num(i + 1, 2), c.count > i + 3, c[i + 3] == 58, let om = num(i + 4, 2) {
            offset = (oh * 60 + om) * 60_000 * (c[i] == 45 ? -1 : 1)
            i += 6
        } else {
            return nil
        }
        guard i == c.count else { return nil }
        let days = days(fromCivil: y, mo, d)
        return days * 86_400_000 + h * 3_600_000 + mi * 60_000 + s * 1000 + millis - offset
    }

    static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : -((-a + b - 1) / b) }

    /// Howard Hinnant's days-from-civil and its inverse (proleptic Gregorian calendar).
    static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = floorDivide(z, 146_097)
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    static func days(fromCivil y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = floorDivide(y, 400)
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func pad(_ v: Int64, _ width: Int) -> String {
        let s = String(v)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
}
