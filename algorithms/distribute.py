"""Data-parallel training on several devices of one host, with tf.distribute.

With two or more training devices, an agent creates its variables (network and
optimizer state) under a `tf.distribute.MirroredStrategy`: every device holds a copy,
and the copies stay equal. A learner step then

1. cuts the batch of B sequences into one shard of B / D per device (D devices);
2. computes the loss and its gradients on each device, on its own shard;
3. averages the gradients over the devices (an all-reduce). The losses are means over
   each shard's T x B/D transitions, so the average is the gradient of the whole batch's
   mean loss, as on one device;
4. clips and applies that one update to every copy.

Acting reads the copy on the inference device, so the variables `act` reads are the
ones training writes, as with one device. A checkpoint holds one value per variable:
it restores into any number of devices. With one device none of this is in the way:
no strategy, and the step is the plain one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from seedfleet.algorithms.graph import graph_function
from seedfleet.errors import UsageError


class DataParallel:
    """The training devices of an agent: mirrored variables, sharded batches, reduced outputs."""

    def __init__(self, devices: tuple[str, ...] = (), batch_size: int = 0):
        """`batch_size`: sequences per learner step, which must split evenly over the devices."""
        self.devices = devices
        self.strategy = tf.distribute.MirroredStrategy(list(devices)) if len(devices) > 1 else None
        self._check_split(batch_size)

    def _check_split(self, size: int) -> None:
        if size % self.replicas:
            raise UsageError(f"--batch-size {size} does not split over {self.replicas} training devices: "
                             "make it a multiple of --train-devices")

    @property
    def replicas(self) -> int:
        return self.strategy.num_replicas_in_sync if self.strategy else 1

    def scope(self) -> contextlib.AbstractContextManager:
        """Variables created inside are mirrored on every device (with one device: plain)."""
        return self.strategy.scope() if self.strategy else contextlib.nullcontext()

    def compile(self, step: Callable, *gradients: Callable, jit_compile: bool) -> tuple[Callable, ...]:
        """tf.functions of a learner step and of each per-device gradient function it runs: XLA
        compiles the whole step on one device; with several GPUs, each GPU's gradients (the step
        around them holds the all-reduce, which XLA does not take). Logical CPU devices share one
        XLA CPU device, which cannot reach another one's variables, so on them nothing is compiled."""
        if not self.strategy:
            return graph_function(step, jit_compile=jit_compile), *gradients
        on_gpus = all(tf.DeviceSpec.from_string(device).device_type == "GPU" for device in self.devices)
        return graph_function(step), *(graph_function(g, jit_compile=jit_compile and on_gpus) for g in gradients)

    def shard(self, batch: Any) -> Any:
        """A nest of batch-major arrays cut into one equal shard per device (outside tf.function)."""
        if not self.strategy:
            return batch
        size = len(tf.nest.flatten(batch)[0])
        self._check_split(size)
        per = size // self.replicas

        def shard_of(context: tf.distribute.experimental.ValueContext) -> Any:
            lo = context.replica_id_in_sync_group * per
            return tf.nest.map_structure(lambda array: array[lo:lo + per], batch)

        return self.strategy.experimental_distribute_values_from_function(shard_of)

    def run(self, fn: Callable[..., Any], *shards: Any) -> Any:
        """`fn(*shard)` on every device with its own shards (inside tf.function); per-device outputs."""
        return self.strategy.run(fn, args=shards) if self.strategy else fn(*shards)

    def mean(self, outputs: Any) -> Any:
        """Per-device outputs (a nest of tensors) averaged over the devices: the all-reduce."""
        if not self.strategy:
            return outputs
        return tf.nest.map_structure(
            lambda value: self.strategy.reduce(tf.distribute.ReduceOp.MEAN, value, axis=None), outputs)

    def concat(self, outputs: Any) -> Any:
        """Per-device outputs with one row per sequence, put back in the batch's order."""
        if not self.strategy:
            return outputs
        return tf.nest.map_structure(
            lambda value: tf.concat(self.strategy.experimental_local_results(value), axis=0), outputs)
