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
        let rows = try db.query("SELECT i, r, s, b, n FROM t")
        #expect(rows == [[.integer(-7), .real(2.5), .text("héllo 'quoted'"), .blob([0, 255, 1]), .null]])
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

    @Test("opening a path in a missing directory is an error, not a crash")
    func badPath() {
        #expect(throws: SQLiteError.self) { _ = try SQLiteDatabase(path: "/nonexistent-dir/x/results.sqlite") }
    }
}
