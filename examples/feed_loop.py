"""A downstream job's loop over `landing feed`, in DuckDB (docs/interface.md § 6).

    landing feed --lake LAKE --product P --since "$(python3 examples/feed_loop.py DB --cursor)" > feed.jsonl
    python3 examples/feed_loop.py DB --load LAKE feed.jsonl

The first form prints the cursor kept in the database (0 before the first load). The
second loads every object the feed names into `events` (one JSON row per line, with
the key it came from) and stores the feed's last cursor, in one transaction: a
failed load keeps the old cursor and is simply run again. A key named again (a day
re-landed with corrections) is reloaded whole: the rows an earlier load took from it
are deleted first, so a corrected day replaces its rows, once. LAKE is the lake root
as `landing` was given it (a folder here; s3://… with DuckDB's httpfs).
"""

import sys

import duckdb


def open_db(path):
    con = duckdb.connect(path)
    con.execute("CREATE TABLE IF NOT EXISTS events (event JSON, source_key VARCHAR)")
    con.execute("CREATE TABLE IF NOT EXISTS feed_cursor (last UBIGINT)")
    return con


def cursor(con):
    row = con.execute("SELECT max(last) FROM feed_cursor").fetchone()
    return row[0] or 0


def load(con, lake, feed):
    rows = con.execute(
        "SELECT key, cursor FROM read_json(?, format = 'newline_delimited', "
        "columns = {key: 'VARCHAR', cursor: 'UBIGINT'})",
        [feed],
    ).fetchall()
    if not rows:  # a cursor past the end of the log: nothing to read
        return cursor(con)
    keys = sorted({key for key, _ in rows if key is not None})
    last = max(c for _, c in rows if c is not None)
    root = lake.rstrip("/")
    con.execute("BEGIN TRANSACTION")
    if keys:
        con.execute("DELETE FROM events WHERE source_key IN (SELECT unnest(?))", [keys])
        con.execute(
            "INSERT INTO events SELECT json, substr(filename, ?) "
            "FROM read_ndjson_objects(?, filename = true)",
            [len(root) + 2, [f"{root}/{k}" for k in keys]],
        )
    con.execute("DELETE FROM feed_cursor")
    con.execute("INSERT INTO feed_cursor VALUES (?)", [last])
    con.execute("COMMIT")
    return last


def main(argv):
    if len(argv) == 3 and argv[2] == "--cursor":
        print(cursor(open_db(argv[1])))
    elif len(argv) == 5 and argv[2] == "--load":
        print(load(open_db(argv[1]), argv[3], argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
