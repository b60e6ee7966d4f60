"""A pre-LN transformer block, forward and backward, with hand-written gradients:
layer norm, a causal multi-head self-attention and a GELU MLP, each with a
residual add. The projections are all ``matmul_v2`` ops (PaddlePaddle's name):
the graph tells them apart by occurrence."""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pytest_opprof import op

Array = Any
_GELU_C = math.sqrt(2.0 / math.pi)


@dataclass(frozen=True)
class BlockConfig:
    batch: int = 8
    seq: int = 64
    dim: int = 128
    heads: int = 4
    dtype: str = "float32"


class TransformerBlock:
    def __init__(self, xp: ModuleType, config: BlockConfig = BlockConfig(), seed: int = 0):
        import numpy as np

        rng = np.random.default_rng(seed)
        d, dt = config.dim, config.dtype
        self.xp, self.config = xp, config

        def weight(*shape: int) -> Array:
            return xp.asarray(rng.standard_normal(shape) / math.sqrt(shape[0]), dtype=dt)

        self.params: dict[str, Array] = {
            "ln1_g": xp.ones(d, dtype=dt), "ln1_b": xp.zeros(d, dtype=dt),
            "w_qkv": weight(d, 3 * d), "w_o": weight(d, d),
            "ln2_g": xp.ones(d, dtype=dt), "ln2_b": xp.zeros(d, dtype=dt),
            "w_1": weight(d, 4 * d), "b_1": xp.zeros(4 * d, dtype=dt),
            "w_2": weight(4 * d, d), "b_2": xp.zeros(d, dtype=dt),
        }
        self.grads: dict[str, Array] = {}
        t = config.seq
        self.causal = xp.asarray(np.triu(np.full((t, t), -1e9), k=1), dtype=dt)

    # -- pieces, each a forward with its grad ----------------------------------------
    @op("layer_norm")
    def _layer_norm(self, x: Array, g: Array, b: Array) -> tuple[Array, tuple]:
        mu = x.mean(axis=-1, keepdims=True)
        inv = 1.0 / self.xp.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)
        xhat = (x - mu) * inv
        return xhat * g + b, (xhat, inv, g)

    @op("layer_norm_grad")
    def _layer_norm_grad(self, dy: Array, cache: tuple) -> tuple[Array, Array, Array]:
        xhat, inv, g = cache
        d = xhat.shape[-1]
        dxhat = dy * g
        dx = inv / d * (d * dxhat - dxhat.sum(-1, keepdims=True)
                        - xhat * (dxhat * xhat).sum(-1, keepdims=True))
        return dx, (dy * xhat).sum(axis=(0, 1)), dy.sum(axis=(0, 1))

    @staticmethod
    def _matmul(x: Array, w: Array) -> Array:
        with op("matmul_v2"):
            return x @ w

    @staticmethod
    def _matmul_grad(x: Array, w: Array, dy: Array) -> tuple[Array, Array]:
        with op("matmul_v2_grad"):
            dw = x.reshape(-1, x.shape[-1]).T @ dy.reshape(-1, dy.shape[-1])
            return dy @ w.T, dw

    def _split_heads(self, x: Array) -> Array:
        b, t, d = x.shape
        h = self.config.heads
        with op("transpose2"):
            return x.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)

    def _merge_heads(self, x: Array) -> Array:
        b, h, t, dh = x.shape
        with op("transpose2"):
            return x.transpose(0, 2, 1, 3).reshape(b, t, h * dh)

    @op("gelu")
    def _gelu(self, x: Array) -> Array:
        return 0.5 * x * (1.0 + self.xp.tanh(_GELU_C * (x + 0.044715 * x ** 3)))

    @op("gelu_grad")
    def _gelu_grad(self, x: Array, dy: Array) -> Array:
        t = self.xp.tanh(_GELU_C * (x + 0.044715 * x ** 3))
        return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _GELU_C * (1 + 3 * 0.044715 * x * x))

    # -- the block -----------------------------------------------------------------
    def forward(self, x: Array) -> Array:
        p, xp = self.params, self.xp
        c: dict[str, Any] = {"x": x}
        h1, c["ln1"] = self._layer_norm(x, p["ln1_g"], p["ln1_b"])
        c["h1"] = h1
        qkv = self._matmul(h1, p["w_qkv"])
        d = self.config.dim
        q, k, v = (self._split_heads(qkv[..., i * d:(i + 1) * d]) for i in range(3))
        c["q"], c["k"], c["v"] = q, k, v
        scale = 1.0 / math.sqrt(q.shape[-1])
        with op("matmul_v2"):
            s = (q @ k.transpose(0, 1, 3, 2)) * scale
        with op("softmax"):
            s = s + self.causal
            e = xp.exp(s - s.max(axis=-1, keepdims=True))
            att = e / e.sum(axis=-1, keepdims=True)
        c["att"] = att
        with op("matmul_v2"):
            o = att @ v
        o = self._merge_heads(o)
        c["o"] = o
        a = self._matmul(o, p["w_o"])
        with op("elementwise_add"):
            x2 = x + a
        h2, c["ln2"] = self._layer_norm(x2, p["ln2_g"], p["ln2_b"])
        c["h2"] = h2
        u = self._matmul(h2, p["w_1"])
        with op("elementwise_add"):
            u = u + p["b_1"]
        c["u"] = u
        g = self._gelu(u)
        c["g"] = g
        m = self._matmul(g, p["w_2"])
        with op("elementwise_add"):
            y = x2 + m + p["b_2"]
        self.cache = c
        return y

    def backward(self, dy: Array) -> Array:
        p, c, gr = self.params, self.cache, self.grads
        with op("elementwise_add_grad"):
            gr["b_2"] = dy.sum(axis=(0, 1))
        dg, gr["w_2"] = self._matmul_grad(c["g"], p["w_2"], dy)
        du = self._gelu_grad(c["u"], dg)
        with op("elementwise_add_grad"):
            gr["b_1"] = du.sum(axis=(0, 1))
        dh2, gr["w_1"] = self._matmul_grad(c["h2"], p["w_1"], du)
        dx2, gr["ln2_g"], gr["ln2_b"] = self._layer_norm_grad(dh2, c["ln2"])
        dx2 = dx2 + dy
        do, gr["w_o"] = self._matmul_grad(c["o"], p["w_o"], dx2)
        b, t, d = do.shape
        h = self.config.heads
        with op("transpose2_grad"):
            do = do.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)
        q, k, v, att = c["q"], c["k"], c["v"], c["att"]
        scale = 1.0 / math.sqrt(q.shape[-1])
        with op("matmul_v2_grad"):
            datt = do @ v.transpose(0, 1, 3, 2)
            dv = att.transpose(0, 1, 3, 2) @ do
        with op("softmax_grad"):
            ds = att * (datt - (datt * att).sum(axis=-1, keepdims=True))
        with op("matmul_v2_grad"):
            dq = (ds @ k) * scale
            dk = (ds.transpose(0, 1, 3, 2) @ q) * scale
        with op("transpose2_grad"):
            dqkv = self.xp.concatenate(
                [z.transpose(0, 2, 1, 3).reshape(b, t, d) for z in (dq, dk, dv)], axis=-1)
        dh1, gr["w_qkv"] = self._matmul_grad(c["h1"], p["w_qkv"], dqkv)
        dx, gr["ln1_g"], gr["ln1_b"] = self._layer_norm_grad(dh1, c["ln1"])
        return dx + dx2


def mse_loss(xp: ModuleType, y: Array, target: Array) -> tuple[Array, Array]:
    """The loss and its gradient with respect to ``y``."""
    with op("mse_loss"):
        diff = y - target
        return (diff * diff).mean(), 2.0 * diff / diff.size


def sgd(block: TransformerBlock, lr: float = 1e-2) -> None:
    for name, grad in block.grads.items():
        with op("sgd"):
            block.params[name] -= lr * grad
