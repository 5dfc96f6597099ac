"""The action distributions against plain NumPy loops written from their definitions."""

import math

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.algorithms.distributions import Categorical, DiagGaussian


def gaussian_reference(mean, log_std, action):
    """log N(a; mu, diag sigma^2) and its entropy, one dimension at a time."""
    logp, entropy = 0.0, 0.0
    for m, s, a in zip(mean, log_std, action, strict=True):
        sigma = math.exp(s)
        logp += -((a - m) ** 2) / (2 * sigma**2) - math.log(sigma) - 0.5 * math.log(2 * math.pi)
        entropy += 0.5 * math.log(2 * math.pi * math.e * sigma**2)
    return logp, entropy


def gaussian_kl_reference(mp, sp, mq, sq):
    total = 0.0
    for a, b, c, d in zip(mp, sp, mq, sq, strict=True):
        var_p, var_q = math.exp(2 * b), math.exp(2 * d)
        total += 0.5 * (math.log(var_q / var_p) + (var_p + (a - c) ** 2) / var_q - 1.0)
    return total


def test_the_diagonal_gaussian_s_log_probability_entropy_and_kl_match_the_formulas():
    rng = np.random.default_rng(0)
    mean, log_std = rng.normal(size=(5, 3)), rng.normal(scale=0.5, size=(5, 3))
    other_mean, other_log_std = rng.normal(size=(5, 3)), rng.normal(scale=0.5, size=(5, 3))
    actions = rng.normal(size=(5, 3)) * 2
    pi = DiagGaussian(np.concatenate([mean, log_std], -1).astype(np.float32))
    other = DiagGaussian(np.concatenate([other_mean, other_log_std], -1).astype(np.float32))
    logp, entropy, kl = pi.log_prob(actions).numpy(), pi.entropy().numpy(), pi.kl(other).numpy()
    for i in range(5):
        want_logp, want_entropy = gaussian_reference(mean[i], log_std[i], actions[i])
        assert logp[i] == pytest.approx(want_logp, rel=1e-5, abs=1e-5)
        assert entropy[i] == pytest.approx(want_entropy, rel=1e-5)
        assert kl[i] == pytest.approx(gaussian_kl_reference(mean[i], log_std[i], other_mean[i], other_log_std[i]),
                                      rel=1e-4, abs=1e-5)
    assert np.allclose(pi.kl(pi).numpy(), 0.0, atol=1e-6)
    np.testing.assert_array_equal(pi.mode().numpy(), mean.astype(np.float32))


def test_gaussian_samples_have_the_policy_s_mean_and_spread():
    tf.random.set_seed(1)
    params = np.tile(np.array([[1.5, -2.0, math.log(0.5), math.log(2.0)]], np.float32), (20000, 1))
    samples = DiagGaussian(params).sample().numpy()
    assert samples.shape == (20000, 2)
    np.testing.assert_allclose(samples.mean(0), [1.5, -2.0], atol=0.05)
    np.testing.assert_allclose(samples.std(0), [0.5, 2.0], rtol=0.03)


def test_the_categorical_s_log_probability_entropy_and_kl_match_the_formulas():
    rng = np.random.default_rng(2)
    logits, other_logits = rng.normal(size=(4, 6)) * 2, rng.normal(size=(4, 6))
    actions = rng.integers(6, size=4)
    pi, other = Categorical(logits.astype(np.float32)), Categorical(other_logits.astype(np.float32))
    for i in range(4):
        p = np.exp(logits[i] - logits[i].max())
        p /= p.sum()
        q = np.exp(other_logits[i] - other_logits[i].max())
        q /= q.sum()
        assert pi.log_prob(actions).numpy()[i] == pytest.approx(math.log(p[actions[i]]), rel=1e-5)
        assert pi.entropy().numpy()[i] == pytest.approx(-sum(x * math.log(x) for x in p), rel=1e-5)
        kl = sum(a * math.log(a / b) for a, b in zip(p, q, strict=True))
        assert pi.kl(other).numpy()[i] == pytest.approx(kl, rel=1e-4)
        assert pi.mode().numpy()[i] == int(np.argmax(logits[i]))
    drawn = Categorical(np.log([[0.7, 0.2, 0.1]] * 10000).astype(np.float32)).sample().numpy()
    np.testing.assert_allclose(np.bincount(drawn, minlength=3) / 10000, [0.7, 0.2, 0.1], atol=0.02)
