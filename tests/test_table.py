"""The one table aligner: columns line up by display width (CJK and emoji take two
columns, combining marks none), in every terminal table."""

from __future__ import annotations

from pytest_opprof.render.table import align, width
from pytest_opprof.render.text import paddle_table, singa_ops

from .fakes import train_profile

#: Names of every width: CJK (2 columns a character), an emoji (2), a combining accent
#: (0), and plain ASCII.
NAMES = (("卷积", 3000), ("relu😀", 1000), ("e\u0301x", 500), ("conv2d_grad", 250))


def _wide_profile():
    def body(profiler, dev, i):
        for name, ns in NAMES:
            with profiler.op(name):
                dev.kernel(ns)

    return train_profile(body=body)


def test_display_width_counts_wide_characters_twice_and_marks_not_at_all():
    assert width("conv2d") == 6
    assert width("卷积") == 4
    assert width("relu😀") == 6
    assert width("e\u0301x") == 2
    assert width("\uff46\uff55\uff4c\uff4c") == 8  # fullwidth Latin "full"
    assert width("") == 0


def test_align_pads_to_the_widest_cell_and_leaves_no_trailing_space():
    assert align([["a", "1", "x"], ["卷积", "100", "y"]], right={1}) == [
        "a       1  x",
        "卷积  100  y",
    ]
    assert align([["name", "v"], ["n"]], sep=" | ") == ["name | v", "n"]
    assert align([["a", "b"]], minimum={0: 4}) == ["a     b"]
    assert align([]) == []


def test_the_paddle_table_lines_up_cjk_and_emoji_names():
    # each "total=" starts at the same terminal column: 4 + 2 for 卷积, 4 + 1 + 2 for
    # relu😀, 2 for éx (the accent combines), 11 for conv2d_grad
    assert paddle_table(_wide_profile()).split("\n", 1)[1] == (
        "Stat=卷积          total=0.009     avg=0.003     max=0.003     min=0.003     count=3\n"
        "Stat=relu😀        total=0.003     avg=0.001     max=0.001     min=0.001     count=3\n"
        "Stat=e\u0301x            total=0.0015    avg=0.0005    max=0.0005    min=0.0005    "
        "count=3\n"
        "Stat=conv2d_grad   total=0.00075   avg=0.00025   max=0.00025   min=0.00025   count=3"
    )
    for line in paddle_table(_wide_profile()).splitlines()[1:]:
        assert width(line[:line.index("total=")]) == len("Stat=conv2d_grad   ")


def test_singas_list_shows_wide_names_whole_one_line_each():
    """SINGA's list is SINGA's own line, ``OP_IDk. name : value``, not a table: no
    column to pad; the names come through as written."""
    assert singa_ops(_wide_profile()).splitlines()[1:] == [
        "OP_ID0. 卷积 : 3e-06 sec", "OP_ID1. relu😀 : 1e-06 sec",
        "OP_ID2. e\u0301x : 5e-07 sec", "OP_ID3. conv2d_grad : 2.5e-07 sec"]


def test_the_gates_verdict_table_lines_up_cjk_and_emoji_names():
    """Every column but the op's is right-aligned, the verdict last: a table whose
    columns line up has every line as wide on the terminal."""
    from pytest_opprof.render.verdicts import verdict_table

    from .test_render import gated, named_profile

    for name in ("卷积", "relu😀", "e\u0301x"):
        record = gated(named_profile(name))
        assert record.result is not None
        lines = verdict_table(record.result).splitlines()[1:]
        assert len({width(line) for line in lines}) == 1, lines
        assert all(name in line for line in lines[1:])
