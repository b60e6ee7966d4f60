"""A small ResNet training step: convolution as im2col + GEMM, batch norm, ReLU,
max and average pooling, residual adds, a fully connected layer, softmax
cross-entropy and momentum SGD, with hand-written backward passes."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pytest_opprof import op

from . import redo_extra

Array = Any


def im2col(xp: ModuleType, x: Array, k: int, stride: int, pad: int) -> Array:
    """(N, C, H, W) -> (N*OH*OW, C*k*k) patches."""
    n, c, h, w = x.shape
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    xpad = xp.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    col = xp.empty((n, c, k, k, oh, ow), dtype=x.dtype)
    for ky in range(k):
        for kx in range(k):
            col[:, :, ky, kx] = xpad[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride]
    return col.transpose(0, 4, 5, 1, 2, 3).reshape(n * oh * ow, c * k * k)


def col2im(xp: ModuleType, col: Array, shape: tuple, k: int, stride: int, pad: int) -> Array:
    """The adjoint of :func:`im2col`: overlapping patches add up."""
    n, c, h, w = shape
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    col = col.reshape(n, oh, ow, c, k, k).transpose(0, 3, 4, 5, 1, 2)
    img = xp.zeros((n, c, h + 2 * pad, w + 2 * pad), dtype=col.dtype)
    for ky in range(k):
        for kx in range(k):
            img[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride] += col[:, :, ky, kx]
    return img[:, :, pad:pad + h, pad:pad + w]


class Layer:
    """Parameters and their gradients by name; forward caches what backward needs."""

    def __init__(self) -> None:
        self.params: dict[str, Array] = {}
        self.grads: dict[str, Array] = {}


class Conv2d(Layer):
    def __init__(self, xp: ModuleType, rng: Any, cin: int, cout: int, k: int = 3,
                 stride: int = 1, pad: int = 1, dtype: Any = "float32") -> None:
        super().__init__()
        self.xp, self.k, self.stride, self.pad = xp, k, stride, pad
        scale = (2.0 / (cin * k * k)) ** 0.5
        self.params["W"] = xp.asarray(rng.standard_normal((cout, cin, k, k)) * scale, dtype=dtype)

    @op("conv2d")
    def forward(self, x: Array) -> Array:
        n, _, h, w = x.shape
        W = self.params["W"]
        oh = (h + 2 * self.pad - self.k) // self.stride + 1
        ow = (w + 2 * self.pad - self.k) // self.stride + 1
        self.x_shape = x.shape
        self.col = im2col(self.xp, x, self.k, self.stride, self.pad)
        out = self.col @ W.reshape(W.shape[0], -1).T
        redo_extra("conv2d", lambda part: im2col(self.xp, part, self.k, self.stride, self.pad)
                   @ W.reshape(W.shape[0], -1).T, x)
        return out.reshape(n, oh, ow, -1).transpose(0, 3, 1, 2)

    @op("conv2d_grad")
    def backward(self, dy: Array) -> Array:
        W = self.params["W"]
        dy = dy.transpose(0, 2, 3, 1).reshape(-1, W.shape[0])
        self.grads["W"] = (dy.T @ self.col).reshape(W.shape)
        dcol = dy @ W.reshape(W.shape[0], -1)
        return col2im(self.xp, dcol, self.x_shape, self.k, self.stride, self.pad)


class BatchNorm2d(Layer):
    """Training-mode batch norm over (N, H, W) for each channel."""

    def __init__(self, xp: ModuleType, channels: int, eps: float = 1e-5,
                 dtype: Any = "float32") -> None:
        super().__init__()
        self.xp, self.eps = xp, eps
        self.params["gamma"] = xp.ones((1, channels, 1, 1), dtype=dtype)
        self.params["beta"] = xp.zeros((1, channels, 1, 1), dtype=dtype)

    @op("batch_norm")
    def forward(self, x: Array) -> Array:
        redo_extra("batch_norm", self._normalize, x)
        self.inv_std, self.xhat = self._normalize(x)
        return self.params["gamma"] * self.xhat + self.params["beta"]

    def _normalize(self, x: Array) -> tuple[Array, Array]:
        mean = x.mean(axis=(0, 2, 3), keepdims=True)
        inv_std = 1.0 / self.xp.sqrt(x.var(axis=(0, 2, 3), keepdims=True) + self.eps)
        return inv_std, (x - mean) * inv_std

    @op("batch_norm_grad")
    def backward(self, dy: Array) -> Array:
        axes = (0, 2, 3)
        m = dy.size // dy.shape[1]
        self.grads["gamma"] = (dy * self.xhat).sum(axis=axes, keepdims=True)
        self.grads["beta"] = dy.sum(axis=axes, keepdims=True)
        dxhat = dy * self.params["gamma"]
        return (self.inv_std / m) * (
            m * dxhat - dxhat.sum(axis=axes, keepdims=True)
            - self.xhat * (dxhat * self.xhat).sum(axis=axes, keepdims=True)
        )


class ReLU(Layer):
    @op("relu")
    def forward(self, x: Array) -> Array:
        redo_extra("relu", lambda part: part * (part > 0), x)
        self.mask = x > 0
        return x * self.mask

    @op("relu_grad")
    def backward(self, dy: Array) -> Array:
        redo_extra("relu_grad", lambda d, m: d * m, dy, self.mask)
        return dy * self.mask


class MaxPool2x2(Layer):
    def __init__(self, xp: ModuleType) -> None:
        super().__init__()
        self.xp = xp

    @op("pool2d")
    def forward(self, x: Array) -> Array:
        n, c, h, w = x.shape
        win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5)
        win = win.reshape(n, c, h // 2, w // 2, 4)
        self.shape = x.shape
        self.argmax = win.argmax(axis=-1)
        return win.max(axis=-1)

    @op("pool2d_grad")
    def backward(self, dy: Array) -> Array:
        xp = self.xp
        n, c, h, w = self.shape
        onehot = self.argmax[..., None] == xp.arange(4)
        win = onehot * dy[..., None]
        win = win.reshape(n, c, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5)
        return win.reshape(n, c, h, w)


class GlobalAvgPool(Layer):
    def __init__(self, xp: ModuleType) -> None:
        super().__init__()
        self.xp = xp

    @op("pool2d")
    def forward(self, x: Array) -> Array:
        self.shape = x.shape
        return x.mean(axis=(2, 3))

    @op("pool2d_grad")
    def backward(self, dy: Array) -> Array:
        _, _, h, w = self.shape
        return self.xp.broadcast_to((dy / (h * w))[:, :, None, None], self.shape)


class Linear(Layer):
    """PaddlePaddle's fc: ``mul`` then ``elementwise_add``."""

    def __init__(self, xp: ModuleType, rng: Any, din: int, dout: int,
                 dtype: Any = "float32") -> None:
        super().__init__()
        self.params["W"] = xp.asarray(rng.standard_normal((din, dout)) / din ** 0.5, dtype=dtype)
        self.params["b"] = xp.zeros((dout,), dtype=dtype)

    def forward(self, x: Array) -> Array:
        self.x = x
        with op("mul"):
            y = x @ self.params["W"]
        with op("elementwise_add"):
            return y + self.params["b"]

    def backward(self, dy: Array) -> Array:
        with op("elementwise_add_grad"):
            self.grads["b"] = dy.sum(axis=0)
        with op("mul_grad"):
            self.grads["W"] = self.x.T @ dy
            return dy @ self.params["W"].T


class SoftmaxCrossEntropy(Layer):
    """``softmax``, ``cross_entropy`` and ``mean``, each with its own grad op."""

    def __init__(self, xp: ModuleType) -> None:
        super().__init__()
        self.xp = xp

    def forward(self, logits: Array, labels: Array) -> Array:
        xp = self.xp
        with op("softmax"):
            z = logits - logits.max(axis=1, keepdims=True)
            e = xp.exp(z)
            self.p = e / e.sum(axis=1, keepdims=True)
        with op("cross_entropy"):
            self.labels = labels
            picked = self.p[xp.arange(labels.shape[0]), labels]
            losses = -xp.log(picked)
        with op("mean"):
            return losses.mean()

    def backward(self) -> Array:
        xp = self.xp
        n = self.labels.shape[0]
        with op("mean_grad"):
            dlosses = xp.full((n,), 1.0 / n, dtype=self.p.dtype)
        with op("cross_entropy_grad"):
            dp = xp.zeros_like(self.p)
            rows = xp.arange(n)
            dp[rows, self.labels] = -dlosses / self.p[rows, self.labels]
        with op("softmax_grad"):
            return self.p * (dp - (dp * self.p).sum(axis=1, keepdims=True))


class ResidualBlock(Layer):
    """conv-bn-relu-conv-bn, plus the input, then relu."""

    def __init__(self, xp: ModuleType, rng: Any, channels: int, dtype: Any) -> None:
        super().__init__()
        self.layers = [Conv2d(xp, rng, channels, channels, dtype=dtype),
                       BatchNorm2d(xp, channels, dtype=dtype), ReLU(),
                       Conv2d(xp, rng, channels, channels, dtype=dtype),
                       BatchNorm2d(xp, channels, dtype=dtype)]
        self.out_relu = ReLU()

    def forward(self, x: Array) -> Array:
        y = x
        for layer in self.layers:
            y = layer.forward(y)
        with op("elementwise_add"):
            y = y + x
        return self.out_relu.forward(y)

    def backward(self, dy: Array) -> Array:
        dy = self.out_relu.backward(dy)
        with op("elementwise_add_grad"):
            dskip = dy  # the sum passes its gradient to both inputs unchanged
        for layer in reversed(self.layers):
            dy = layer.backward(dy)
        return dy + dskip


@dataclass(frozen=True)
class ResNetConfig:
    batch: int = 16
    channels: int = 16
    size: int = 32
    classes: int = 10
    blocks: int = 2
    dtype: str = "float32"


class ResNet:
    """stem conv-bn-relu, 2x2 max pool, residual blocks, global average pool, fc."""

    def __init__(self, xp: ModuleType, config: ResNetConfig = ResNetConfig(), seed: int = 0):
        import numpy as np

        rng = np.random.default_rng(seed)
        c, dtype = config.channels, config.dtype
        self.xp, self.config = xp, config
        self.layers: list[Layer] = [
            Conv2d(xp, rng, 3, c, dtype=dtype), BatchNorm2d(xp, c, dtype=dtype), ReLU(),
            MaxPool2x2(xp),
            *(ResidualBlock(xp, rng, c, dtype) for _ in range(config.blocks)),
            GlobalAvgPool(xp), Linear(xp, rng, c, config.classes, dtype=dtype),
        ]
        self.loss = SoftmaxCrossEntropy(xp)

    def parameters(self) -> list[tuple[Layer, str]]:
        """Every (layer, parameter name), nested layers included, in a fixed order."""
        found: list[tuple[Layer, str]] = []

        def walk(layer: Layer) -> None:
            found.extend((layer, name) for name in layer.params)
            for child in getattr(layer, "layers", []):
                walk(child)

        for layer in self.layers:
            walk(layer)
        return found

    def forward(self, x: Array, labels: Array) -> Array:
        for layer in self.layers:
            x = layer.forward(x)
        return self.loss.forward(x, labels)

    def backward(self) -> None:
        dy = self.loss.backward()
        for layer in reversed(self.layers):
            dy = layer.backward(dy)


class Momentum:
    """PaddlePaddle's ``momentum`` op, one per parameter: v = mu v + g; p -= lr v."""

    def __init__(self, xp: ModuleType, lr: float = 0.05, mu: float = 0.9) -> None:
        self.xp, self.lr, self.mu = xp, lr, mu
        self.velocity: dict[int, Array] = {}

    def step(self, parameters: list[tuple[Layer, str]]) -> None:
        for layer, name in parameters:
            with op("momentum"):
                p, g = layer.params[name], layer.grads[name]
                v = self.velocity.get(id(p))
                v = g.copy() if v is None else self.mu * v + g
                self.velocity[id(p)] = v
                p -= self.lr * v


def synthetic_batch(xp: ModuleType, config: ResNetConfig, seed: int = 1) -> tuple[Array, Array]:
    """Images with a learnable signal: the label sets the mean of one channel."""
    import numpy as np

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, config.classes, size=config.batch)
    x = rng.standard_normal((config.batch, 3, config.size, config.size))
    x[:, 0] += (labels[:, None, None] - config.classes / 2) / config.classes
    return xp.asarray(x, dtype=config.dtype), xp.asarray(labels)
