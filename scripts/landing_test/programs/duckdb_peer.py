"""The bench's peer (scripts/bench): DuckDB doing only the core of a landing run on
the same day file, with no SHA-256, no per-line reasons and no input order kept:
read the seven typed columns of the `progress` contract, `event_time` to UTC, the
distinct rows, written out as JSON lines.

    python duckdb_peer.py INPUT OUTPUT THREADS

Prints the number of rows written (COPY's own count). Run with the pinned DuckDB of the tests' venv
(LANDING_TEST_DUCKDB_PYTHON).
"""

import sys

import duckdb

COLUMNS = (
    "{event_id: 'VARCHAR', learner_id: 'VARCHAR', lesson_id: 'VARCHAR', event_type: 'VARCHAR', "
    "attempt_number: 'INTEGER', event_time: 'TIMESTAMPTZ', checkpoint: 'BIGINT'}"
)


def quoted(path):
    return "'" + path.replace("'", "''") + "'"


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    source, out, threads = argv[1], argv[2], int(argv[3])
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute("SET TimeZone = 'UTC'")
    written = con.execute(
        f"COPY (SELECT DISTINCT event_id, learner_id, lesson_id, event_type, attempt_number, "
        f"event_time AT TIME ZONE 'UTC' AS event_time, checkpoint "
        f"FROM read_json({quoted(source)}, format = 'newline_delimited', ignore_errors = true, "
        f"columns = {COLUMNS})) TO {quoted(out)} (FORMAT json)"
    ).fetchone()
    print(written[0])


if __name__ == "__main__":
    main(sys.argv)
