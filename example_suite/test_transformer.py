"""A transformer block's forward and backward at two sequence lengths.

It names no phases: the report splits forward from backward at the first op
whose name ends in ``_grad``, as SINGA does.
"""

from __future__ import annotations

import numpy as np
import pytest

from example_suite.workloads.transformer import BlockConfig, TransformerBlock, mse_loss, sgd


@pytest.mark.parametrize("seq", [32, 64])
def test_transformer_block(gpu_profiler, seq):
    xp = gpu_profiler.xp
    # a smaller batch where instructions are counted under valgrind: the same code
    config = BlockConfig(seq=seq, batch=2 if gpu_profiler.measure == "instructions" else 8)
    block = TransformerBlock(xp, config)
    rng = np.random.default_rng(0)
    x = xp.asarray(rng.standard_normal((config.batch, seq, config.dim)), dtype=config.dtype)
    target = xp.roll(x, 1, axis=1)  # learn to look one token back
    losses = []
    for _ in gpu_profiler.iterations(12):
        y = block.forward(x)
        loss, dy = mse_loss(xp, y, target)
        block.backward(dy)
        sgd(block)
        losses.append(loss)
    assert float(losses[-1]) < float(losses[0])
