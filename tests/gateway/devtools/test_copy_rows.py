"""COPY's text format as the seed writes it, read back by a real PostgreSQL."""

import datetime as dt
import json
import uuid
from decimal import Decimal

import psycopg

from db.engine import libpq_url
from gateway.devtools.copy_rows import CopyLines, copy_text

TRICKY = {"feature": 'a\tb\nc\\d"e', "plan": "ünïcode", "env": "prod"}


def test_copy_text_escapes_like_postgres_expects():
    assert copy_text(None) == "\\N"
    assert copy_text(True) == "t" and copy_text(False) == "f"
    assert copy_text(["a", 'b"c']) == '{"a","b\\\\"c"}'
    assert copy_text("tab\there") == "tab\\there"
    assert copy_text(12) == "12" and copy_text(Decimal("0.000125")) == "0.000125"
    u = uuid.uuid4()
    assert copy_text(u) == str(u)


def test_a_dict_becomes_its_json_text_escaped_for_copy():
    text = copy_text(TRICKY)
    assert "\t" not in text and "\n" not in text  # one field on one line
    # COPY turns \\ back into \ (and \t, \n into the characters, which JSON never holds)
    unescaped = text.replace("\\\\", "\\")
    assert json.loads(unescaped) == TRICKY


def test_copy_lines_render_each_shared_dict_once_and_match_copy_text():
    render = CopyLines()
    shared = {"feature": "chat"}
    rows = [(1, "x", shared), (2, None, shared), (3, "y", None)]
    assert [render.line(r) for r in rows] == ["\t".join(map(copy_text, r)) for r in rows]
    assert len(render._last) == 2


def test_postgres_reads_the_fields_back_as_written(database_url):
    when = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    row = (when, 'a\tb\\c"d', ["m1", 'm"2'], TRICKY, None, True, Decimal("1.5"))
    with psycopg.connect(libpq_url(database_url)) as conn, conn.cursor() as cur:
        cur.execute(
            "CREATE TEMP TABLE copy_probe (at timestamptz, s text, path text[], tags jsonb,"
            " nothing jsonb, flag boolean, amount numeric)"
        )
        with cur.copy("COPY copy_probe FROM STDIN") as copy:
            copy.write(CopyLines().line(row) + "\n")
        back = cur.execute("SELECT * FROM copy_probe").fetchone()
    assert back == row
