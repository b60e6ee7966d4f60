"""Exact-string tests of the report formats, on the fake clock."""

from __future__ import annotations

from pytest_opprof.render.text import paddle_table, render, seconds, singa_ops, singa_phases

from .fakes import fake_profiler, train_profile


def test_seconds_print_like_a_cpp_stream():
    assert seconds(17372.2) == "1.73722e-05"
    assert seconds(612724) == "0.000612724"
    assert seconds(40912700) == "0.0409127"


def test_singa_phase_block():
    assert singa_phases(train_profile()) == (
        "Time Profiling:\n"
        "Forward Propagation Time : 1.25e-06 sec\n"
        "Backward Propagation Time : 2.5e-06 sec"
    )


def test_other_phases_take_their_own_name():
    def body(profiler, dev, i):
        for phase in ("forward", "update"):
            with profiler.phase(phase), profiler.op("x"):
                dev.kernel(1000)

    assert singa_phases(train_profile(body=body)).splitlines()[-1] == "Update Time : 1e-06 sec"


def test_singa_op_list_in_graph_order():
    assert singa_ops(train_profile()) == (
        "Time Profiling:\n"
        "OP_ID0. conv2d : 1e-06 sec\n"
        "OP_ID1. relu : 2.5e-07 sec\n"
        "OP_ID2. relu_grad : 5e-07 sec\n"
        "OP_ID3. conv2d_grad : 2e-06 sec"
    )


def test_paddle_table_sorted_by_total_in_ms_with_aligned_columns():
    assert paddle_table(train_profile()) == (
        "Stat=conv2d_grad   total=0.006     avg=0.002     max=0.002     min=0.002     count=3\n"
        "Stat=conv2d        total=0.003     avg=0.001     max=0.001     min=0.001     count=3\n"
        "Stat=relu_grad     total=0.0015    avg=0.0005    max=0.0005    min=0.0005    count=3\n"
        "Stat=relu          total=0.00075   avg=0.00025   max=0.00025   min=0.00025   count=3"
    )


def test_one_row_reproduces_paddles_line_shape():
    profiler, dev = fake_profiler(skip=0)
    for i in profiler.iterations(2):
        with profiler.op("conv2d_grad"):
            dev.kernel(2_222_000 if i else 15_852_000)
    assert paddle_table(profiler.profile) == (
        "Stat=conv2d_grad   total=18.074   avg=9.037   max=15.852   min=2.222   count=2")


def test_verbosity_levels():
    profile = train_profile()
    assert render(profile, 0) == ""
    one = render(profile, 1)
    assert one.splitlines()[0] == ("backend fake (fake CUDA device; virtual CUDA events): "
                                   "3 of 4 iterations counted (first 1 skipped)")
    assert "Forward Propagation Time" in one and "OP_ID0" not in one
    two = render(profile, 2)
    assert two.startswith(one)
    assert two.splitlines()[-1] == (
        "Op time : 3.75e-06 sec of 5e-06 sec iteration wall time per counted iteration, "
        "25.0% outside any op")


def test_unbalanced_ops_are_reported():
    profiler, dev = fake_profiler(skip=0)
    scope = profiler.op("open")
    for i in profiler.iterations(2):
        if i == 0:
            scope.__enter__()
        with profiler.op("x"):
            dev.kernel(1)
    assert render(profiler.profile, 1).endswith(
        "1 op or phase boundaries were unbalanced (an exit with nothing open, or still open "
        "when the iteration ended) and were left out")
