"""QR-DQN's network: the torso's features, then one linear output per action and quantile.

    Z_i(x, a) = [W phi(x) + b]_{i, a},  the tau_i-quantile of the return, tau_i = (2i + 1) / 2N,
    Q(x, a) = (1 / N) sum_i Z_i(x, a).

The fractions are the midpoints of N equal bins (Dabney et al. 2017, Lemma 2): the quantiles at
those points are the N-atom distribution nearest the return's in the 1-Wasserstein distance.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.iqn.network import FeatureNet
from seedfleet.algorithms.layers import Linear
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.networks import UINT8


class AtomNet(FeatureNet):
    def __init__(self, config: NetworkConfig, obs_shape: tuple[int, ...], num_actions: int, atoms: int,
                 seed: int = 0, obs_dtype: np.dtype = UINT8):
        super().__init__(config, obs_shape, seed, obs_dtype)
        self.num_actions, self.atoms = num_actions, atoms
        self.midpoints = tf.constant((np.arange(atoms) + 0.5) / atoms, tf.float32)
        self.out = Linear(self.torso.out_size, atoms * num_actions, 1.0, self.torso.rng, init=config.dense_init)

    def trained_fractions(self, batch: tf.Tensor) -> tf.Tensor:
        """The N midpoints, for each transition: [B, N]."""
        return tf.tile(self.midpoints[None], [batch, 1])

    target_fractions = trained_fractions

    def quantiles(self, features: tf.Tensor, taus: tf.Tensor) -> tf.Tensor:
        """Z at the midpoints (the head's own fractions: `taus` only names them), [B, N, A]."""
        del taus
        return tf.reshape(self.out(features), [-1, self.atoms, self.num_actions])

    def q_values(self, features: tf.Tensor, spread: bool = False) -> tf.Tensor:
        """Q(x, a), the mean of the N quantiles, [B, A]: deterministic either way."""
        del spread
        return tf.reduce_mean(self.quantiles(features, None), axis=1)
