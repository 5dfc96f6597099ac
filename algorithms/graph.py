"""Every TensorFlow graph the project traces (acting, learner steps, exports) is made here.

`graph_function` is `tf.function` without AutoGraph. AutoGraph rewrites the source of every
Python function a trace calls, so that Python `if`, `for` and `while` over tensors become
graph control flow; the project writes that control flow itself (`tf.cond`,
`tf.while_loop`), and a Python `if` or `while` on a tensor then fails at trace time with
TensorFlow's own error instead of being rewritten. Skipping the rewrite halves the first
trace of a learner step: V-trace's for a small LSTM agent took 2.7 s against 5.6 s (beside a
training run on 2 cores), to the same loss, and every learner, `eval` and `export` traces
several graphs as it starts.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf


def graph_function(fn: Callable, **options) -> Callable:
    """`tf.function(fn, **options)` without AutoGraph (`input_signature`, `jit_compile`, ...)."""
    return tf.function(fn, autograph=False, **options)
