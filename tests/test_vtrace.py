"""V-trace against a NumPy loop over the IMPALA paper's sum definition (section 4.1)."""

import numpy as np
import pytest

from seedfleet.algorithms.impala import vtrace


def reference_vtrace(log_rhos, discounts, rewards, values, bootstrap, rho_bar, pg_rho_bar, lam):
    """v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i c_i) delta_t, term by term."""
    T, B = log_rhos.shape
    rhos = np.exp(log_rhos)
    clipped = rhos if rho_bar is None else np.minimum(rho_bar, rhos)
    cs = lam * np.minimum(1.0, rhos)
    v_ext = np.concatenate([values, bootstrap[None]], axis=0)
    vs = np.zeros((T, B))
    for b in range(B):
        for s in range(T):
            total = values[s, b]
            for t in range(s, T):
                weight = 1.0
                for i in range(s, t):
                    weight *= discounts[i, b] * cs[i, b]
                delta = clipped[t, b] * (rewards[t, b] + discounts[t, b] * v_ext[t + 1, b] - values[t, b])
                total += weight * delta
            vs[s, b] = total
    vs_next = np.concatenate([vs[1:], bootstrap[None]], axis=0)
    pg_rhos = rhos if pg_rho_bar is None else np.minimum(pg_rho_bar, rhos)
    adv = pg_rhos * (rewards + discounts * vs_next - values)
    return vs, adv


@pytest.mark.parametrize(
    "rho_bar,pg_rho_bar,lam",
    [(1.0, 1.0, 1.0), (0.7, 1.3, 0.9), (None, None, 0.95), (2.0, 0.5, 0.5)],
)
def test_vtrace_matches_the_paper(rho_bar, pg_rho_bar, lam):
    rng = np.random.default_rng(7)
    T, B = 9, 5
    log_rhos = rng.normal(0, 0.8, (T, B))
    discounts = 0.97 * (rng.random((T, B)) > 0.15)  # some terminations
    rewards = rng.normal(0, 1, (T, B))
    values = rng.normal(0, 1, (T, B))
    bootstrap = rng.normal(0, 1, B)
    out = vtrace.from_importance_weights(
        log_rhos, discounts, rewards, values, bootstrap,
        clip_rho_threshold=rho_bar, clip_pg_rho_threshold=pg_rho_bar, lambda_=lam,
    )
    vs, adv = reference_vtrace(log_rhos, discounts, rewards, values, bootstrap, rho_bar, pg_rho_bar, lam)
    np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.pg_advantages.numpy(), adv, rtol=1e-5, atol=1e-5)


def test_on_policy_vtrace_is_the_n_step_return():
    """With pi = mu and lambda = 1, v_s is the discounted return bootstrapped at T."""
    T, B = 6, 2
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(T, B))
    discounts = np.full((T, B), 0.9)
    values = rng.normal(size=(T, B))
    bootstrap = rng.normal(size=B)
    out = vtrace.from_importance_weights(np.zeros((T, B)), discounts, rewards, values, bootstrap)
    expected = np.zeros((T, B))
    acc = bootstrap.copy()
    for t in reversed(range(T)):
        acc = rewards[t] + 0.9 * acc
        expected[t] = acc
    np.testing.assert_allclose(out.vs.numpy(), expected, rtol=1e-5)


def test_zero_importance_weight_cuts_the_trace():
    """log_rho = -inf: v_s = V(x_s), zero advantage, and no trace through s."""
    T, B = 4, 1
    values = np.array([[1.0], [2.0], [3.0], [4.0]])
    rewards = np.ones((T, B))
    log_rhos = np.zeros((T, B))
    log_rhos[2] = -np.inf
    out = vtrace.from_importance_weights(log_rhos, np.full((T, B), 0.5), rewards, values, np.array([10.0]))
    vs = out.vs.numpy()
    assert vs[2, 0] == pytest.approx(3.0)
    assert out.pg_advantages.numpy()[2, 0] == pytest.approx(0.0)
    # step 1 bootstraps from V(x_2) and no further: 1 + 0.5 * 3
    assert vs[1, 0] == pytest.approx(2.5)


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="rewards"):
        vtrace.from_importance_weights(np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((4, 2)),
                                       np.zeros((3, 2)), np.zeros(2))
