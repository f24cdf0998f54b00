/// The schema of `results.sqlite`, documented table by table in docs/results-schema.md.
///
/// Every table except `run` is a pure function of scenario, seed and build, so two runs
/// can be compared by `ResultsDigest`. Keys are chosen so rows have one natural order.
public enum ResultsSchema {
    /// Bumped whenever a table changes shape; readers refuse newer databases.
    public static let version: Int64 = 1

    /// The tables that take part in the determinism digest, in digest order, with the
    /// ORDER BY that gives their rows a canonical order.
    public static let deterministicTables: [(name: String, orderBy: String)] = [
        ("scenario", "name"),
        ("device_class", "id"),
        ("metric", "id"),
        ("series_point", "metric_id, bucket_start_ns"),
        ("histogram_bucket", "metric_id, window_start_ns, bucket_index"),
        ("counter_total", "metric_id"),
        ("event_sample", "seq"),
        ("threshold_result", "id"),
        ("invariant_result", "name"),
    ]

    static let statements = """
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = NORMAL;
    CREATE TABLE IF NOT EXISTS schema_info (version INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS run (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS scenario (
        name        TEXT PRIMARY KEY,
        text        TEXT NOT NULL,
        sha256      TEXT NOT NULL,
        seed        INTEGER NOT NULL,
        start_time_of_day_ns INTEGER NOT NULL,
        duration_ns INTEGER NOT NULL,
        bucket_ns   INTEGER NOT NULL,
        devices     INTEGER NOT NULL,
        tick_mode   TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS device_class (
        id         INTEGER PRIMARY KEY,
        name       TEXT NOT NULL UNIQUE,
        count      INTEGER NOT NULL,
        first_device INTEGER NOT NULL,
        parameters TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS metric (
        id             INTEGER PRIMARY KEY,
        name           TEXT NOT NULL,
        labels         TEXT NOT NULL,
        kind           TEXT NOT NULL CHECK (kind IN ('counter', 'gauge', 'histogram')),
        unit           TEXT NOT NULL,
        precision_bits INTEGER,
        description    TEXT NOT NULL,
        UNIQUE (name, labels)
    );
    CREATE TABLE IF NOT EXISTS series_point (
        metric_id       INTEGER NOT NULL REFERENCES metric(id),
        bucket_start_ns INTEGER NOT NULL,
        value           REAL NOT NULL,
        PRIMARY KEY (metric_id, bucket_start_ns)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS histogram_bucket (
        metric_id       INTEGER NOT NULL REFERENCES metric(id),
        window_start_ns INTEGER NOT NULL,
        bucket_index    INTEGER NOT NULL,
        lower_bound     INTEGER NOT NULL,
        upper_bound     INTEGER NOT NULL,
        count           INTEGER NOT NULL,
        PRIMARY KEY (metric_id, window_start_ns, bucket_index)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS counter_total (
        metric_id INTEGER PRIMARY KEY REFERENCES metric(id),
        value     REAL NOT NULL
    );
    CREATE TABLE IF NOT EXISTS event_sample (
        seq    INTEGER PRIMARY KEY,
        at_ns  INTEGER NOT NULL,
        device INTEGER,
        kind   TEXT NOT NULL,
        detail TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS threshold_result (
        id        INTEGER PRIMARY KEY,
        metric    TEXT NOT NULL,
        statistic TEXT NOT NULL,
        op        TEXT NOT NULL,
        bound     REAL NOT NULL,
        observed  REAL,
        passed    INTEGER NOT NULL,
        message   TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS invariant_result (
        name            TEXT PRIMARY KEY,
        checks          INTEGER NOT NULL,
        violations      INTEGER NOT NULL,
        first_violation TEXT
    );
    """

    /// Creates the tables in a new database (or checks an existing one).
    public static func create(in database: SQLiteDatabase) throws {
        try database.execute(statements)
        let existing = try database.query("SELECT version FROM schema_info")
        if existing.isEmpty {
            try database.run("INSERT INTO schema_info (version) VALUES (?)", [.integer(version)])
        }
    }
}
