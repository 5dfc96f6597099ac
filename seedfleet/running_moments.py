"""The merge of a batch's mean and variance into running ones (TensorFlow-free: the learner's
observation statistics and the networks' pixel statistics both call it).

Chan, Golub and LeVeque's parallel update: for a batch of n samples with mean m_b and
variance v_b, against N samples so far with mean m and variance v, d = m_b - m,

    m' = m + d n / (N + n),   v' = (v N + v_b n + d^2 N n / (N + n)) / (N + n),

which equals Welford's one-sample update applied n times.
"""

from __future__ import annotations

import numpy as np


def merge_moments(mean: np.ndarray, variance: np.ndarray, count: float, batch_mean: np.ndarray,
                  batch_variance: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(mean, population variance, count) of the samples so far and the batch's together, in
    float64; with no samples so far (count 0), the batch's own."""
    if count == 0:
        return batch_mean, batch_variance, n
    total = count + n
    delta = batch_mean - mean
    merged_mean = mean + delta * (n / total)
    merged_variance = (variance * count + batch_variance * n + np.square(delta) * (count * n / total)) / total
    return merged_mean, merged_variance, total
