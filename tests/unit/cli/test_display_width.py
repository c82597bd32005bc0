"""Tables line up on a terminal whatever the names hold: wide characters take two columns, combining
and zero-width ones none, and a direction control shows as its escape rather than turning the line."""

from __future__ import annotations

from punctual_cli.display import Column, columns_of, cut, fit


def test_columns_line_up_past_wide_combining_and_zero_width_names() -> None:
    names = ["日本語ジョブ", "plain", "a\u200bb\u0301c", "🙂 emoji", "Hebrew שלום"]
    table = fit([Column("NAME"), Column("STATUS")], [[name, "ACTIVE"] for name in names], None)
    starts = {columns_of(line[: line.rindex("ACTIVE")]) for line in table.splitlines()[1:]}
    assert len(starts) == 1, table
    assert columns_of("日本語") == 6 and columns_of("a\u200bb\u0301c") == 3


def test_a_direction_control_in_a_cell_is_shown_as_its_escape() -> None:
    table = fit([Column("NAME"), Column("STATUS")], [["invoice-\u202egnp.exe", "ACTIVE"]], None)
    assert "invoice-\\u202egnp.exe" in table and "\u202e" not in table


def test_a_cut_counts_columns_not_characters() -> None:
    assert cut("日本語ジョブ", 5) == "日本…"
    assert columns_of(cut("日本語ジョブ", 5)) <= 5
    assert cut("short", 5) == "short"
