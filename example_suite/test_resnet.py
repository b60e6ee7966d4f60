"""A small ResNet training step, profiled op by op."""

from __future__ import annotations

from example_suite.workloads.resnet import Momentum, ResNet, ResNetConfig, synthetic_batch


def test_resnet_train_step(gpu_profiler):
    xp = gpu_profiler.xp
    # counted under valgrind (--opprof-measure=instructions) a smaller batch shows the
    # same code at a quarter of the cost: counts scale with the work
    config = ResNetConfig(batch=4) if gpu_profiler.measure == "instructions" else ResNetConfig()
    model, optimizer = ResNet(xp, config), Momentum(xp)
    images, labels = synthetic_batch(xp, config)
    losses = []
    for _ in gpu_profiler.iterations():
        with gpu_profiler.phase("forward"):
            loss = model.forward(images, labels)
        with gpu_profiler.phase("backward"):
            model.backward()
        with gpu_profiler.phase("update"):
            optimizer.step(model.parameters())
        losses.append(loss)
    assert float(losses[-1]) < float(losses[0]), "the training step should learn"
