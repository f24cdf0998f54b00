import Foundation
import Testing
import LabStore
import LabTestSupport

@Suite("SQLite access")
struct SQLiteTests {
    @Test("statements bind, step and read every value type")
    func roundTrip() throws {
        let db = try SQLiteDatabase(path: ":memory:")
        try db.execute("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB, n TEXT)")
        try db.run("INSERT INTO t VALUES (?,?,?,?,?)", [.integer(-7), .real(2.5), .text("héllo 'quoted'"), .blob([0, 255, 1]), .null])
        // Text with a NUL inside, empty text and an empty blob are values, not NULL or cut short.
        try db.run("INSERT INTO t VALUES (?,?,?,?,?)", [.integer(8), .real(0), .text("a\u{0}b"), .blob([]), .text("")])
        let rows = try db.query("SELECT i, r, s, b, n FROM t ORDER BY i")
        #expect(rows == [[.integer(-7), .real(2.5), .text("héllo 'quoted'"), .blob([0, 255, 1]), .null],
                         [.integer(8), .real(0), .text("a\u{0}b"), .blob([]), .text("")]])
    }

    @Test("buffers bound without a copy are stored as they were, and the caller's buffer is free again after the run")
    func heldBuffers() throws {
        let db = try SQLiteDatabase(path: ":memory:")
        try db.execute("CREATE TABLE t (k INTEGER, s TEXT, b BLOB)")
        var text = Array("first row".utf8)
        var blob: [UInt8] = [1, 2, 3]
        for (k, (nextText, nextBlob)) in [("second", [9] as [UInt8]), ("", [])].enumerated() {
            let insert = try db.statement(static: "INSERT INTO t VALUES (?,?,?)")
            try insert.bind(Int64(k), at: 1)
            try insert.bind(holding: text, at: 2)
            try insert.bind(holding: blob, at: 3, asBlob: true)
            try insert.execute()
            // Written in place, the way a store reuses its encoding buffers: the statement
            // must not still hold (or read) them.
            let before = text.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
            let after = text.withUnsafeMutableBufferPointer { buffer in
                for i in buffer.indices { buffer[i] = 0x5F }
                return UInt(bitPattern: buffer.baseAddress)
            }
            #expect(before == after, "the buffer was still shared, so writing to it copied it")
            text = Array(nextText.utf8)
            blob = nextBlob
        }
        #expect(try db.query("SELECT k, s, b FROM t ORDER BY k") == [
            [.integer(0), .text("first row"), .blob([1, 2, 3])],
            [.integer(1), .text("second"), .blob([9])],
        ])
        // An empty buffer is an empty value, not NULL.
        let insert = try db.statement(static: "INSERT INTO t VALUES (?,?,?)")
        try insert.bind(Int64(2), at: 1)
        try insert.bind(holding: [], at: 2)
        try insert.bind(holding: [], at: 3, asBlob: true)
        try insert.execute()
        #expect(try db.query("SELECT s IS NULL, length(s), b IS NULL, length(b) FROM t WHERE k = 2")
            == [[.integer(0), .integer(0), .integer(0), .integer(0)]])
    }

    @Test("a transaction that throws leaves nothing behind")
    func rollback() throws {
        let db = try SQLiteDatabase(path: ":memory:")
        try db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY)")
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try db.transaction {
                try db.run("INSERT INTO t VALUES (1)")
                throw Boom()
            }
        }
        #expect(try db.query("SELECT COUNT(*) FROM t") == [[.integer(0)]])
    }

    @Test("errors name the statement that failed")
    func errors() throws {
        let db = try SQLiteDatabase(path: ":memory:")
        do {
            try db.execute("CREATE TABLE broken (")
            Issue.record("malformed SQL was accepted")
        } catch {
            #expect(error.description.contains("CREATE TABLE broken"))
        }
        try db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY)")
        try db.run("INSERT INTO t VALUES (1)")
        #expect(throws: SQLiteError.self) { try db.run("INSERT INTO t VALUES (1)") }
    }

    @Test("a row walk hands rows over in order, stops when asked, and then holds no lock on the file")
    func rowWalk() throws {
        let path = TestPaths.scratchDirectory().appendingPathComponent("walk.sqlite").path
        let reader = try SQLiteDatabase(path: path)
        try reader.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, s TEXT)")
        for k in 1...3 { try reader.run("INSERT INTO t VALUES (?, ?)", [.integer(Int64(k)), .text("row \(k)")]) }
        var seen: [String] = []
        try reader.forEachRow("SELECT s FROM t WHERE k >= ? ORDER BY k", [.integer(1)]) { row in
            seen.append(row.string(at: 0) ?? "")
            return seen.count < 2
        }
        #expect(seen == ["row 1", "row 2"])
        // A walk left half way would keep its read lock, and another connection's write
        // would wait out the busy timeout and fail.
        let writer = try SQLiteDatabase(path: path)
        try writer.run("INSERT INTO t VALUES (4, 'row 4')")
        // The cached statement starts again from the first row, with new bindings.
        var again: [String] = []
        try reader.forEachRow("SELECT s FROM t WHERE k >= ? ORDER BY k", [.integer(3)]) { again.append($0.string(at: 0) ?? ""); return true }
        #expect(again == ["row 3", "row 4"])
    }

    @Test("opening a path in a missing directory is an error, not a crash")
    func badPath() {
        #expect(throws: SQLiteError.self) { _ = try SQLiteDatabase(path: "/nonexistent-dir/x/results.sqlite") }
    }
}
