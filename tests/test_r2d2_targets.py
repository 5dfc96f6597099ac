"""R2D2 targets: value rescaling and n-step returns, against hand-computed cases."""

import numpy as np
import pytest

from seedfleet.algorithms.r2d2.loss import inverse_value_rescale, n_step_returns, value_rescale


def test_value_rescale_at_three():
    assert value_rescale(3.0).numpy() == pytest.approx(1.0 + 3e-3, rel=1e-6)
    assert value_rescale(-3.0).numpy() == pytest.approx(-(1.0 + 3e-3), rel=1e-6)
    assert value_rescale(0.0).numpy() == 0.0


def test_inverse_round_trips_on_a_wide_range():
    x = np.concatenate([np.linspace(-1e4, 1e4, 20001), [-1e-3, 1e-3, 0.5, -0.5]]).astype(np.float32)
    back = inverse_value_rescale(value_rescale(x)).numpy()
    np.testing.assert_allclose(back, x, rtol=1e-4, atol=1e-3)
    y = np.linspace(-50, 50, 1001).astype(np.float32)
    np.testing.assert_allclose(value_rescale(inverse_value_rescale(y)).numpy(), y, rtol=1e-4, atol=1e-4)


def test_one_step_returns():
    r = np.array([[1.0], [2.0], [3.0]])
    d = np.full((3, 1), 0.5)
    v = np.array([[10.0], [20.0], [30.0]])
    np.testing.assert_allclose(n_step_returns(r, d, v, 1).numpy(), r + d * v)


def test_n_step_returns_by_hand():
    r = np.array([[1.0], [2.0], [3.0], [4.0]])
    d = np.full((4, 1), 0.5)
    v = np.array([[10.0], [20.0], [30.0], [40.0]])
    out = n_step_returns(r, d, v, 2).numpy()[:, 0]
    assert out[0] == pytest.approx(1 + 0.5 * 2 + 0.25 * 20)
    assert out[1] == pytest.approx(2 + 0.5 * 3 + 0.25 * 30)
    assert out[2] == pytest.approx(3 + 0.5 * 4 + 0.25 * 40)
    # truncation at the end: one step left, bootstrap from the last value
    assert out[3] == pytest.approx(4 + 0.5 * 40)


def test_a_termination_inside_the_window_stops_rewards_and_bootstrap():
    r = np.array([[1.0], [2.0], [3.0], [4.0]])
    d = np.array([[0.9], [0.0], [0.9], [0.9]])  # step 1 terminates
    v = np.array([[10.0], [20.0], [30.0], [40.0]])
    out = n_step_returns(r, d, v, 3).numpy()[:, 0]
    assert out[0] == pytest.approx(1 + 0.9 * 2)  # nothing after the termination
    assert out[1] == pytest.approx(2.0)
    assert out[2] == pytest.approx(3 + 0.9 * 4 + 0.81 * 40)  # truncated: 2 steps, bootstrap V_3


def test_matches_a_plain_loop_on_random_inputs():
    rng = np.random.default_rng(0)
    T, B, n = 9, 3, 5
    r = rng.normal(size=(T, B))
    d = 0.97 * (rng.random((T, B)) > 0.2)
    v = rng.normal(size=(T, B))
    expected = np.zeros((T, B))
    for t in range(T):
        for b in range(B):
            m = min(n, T - t)
            g, scale = 0.0, 1.0
            for k in range(m):
                g += scale * r[t + k, b]
                scale *= d[t + k, b]
            expected[t, b] = g + scale * v[t + m - 1, b]
    np.testing.assert_allclose(n_step_returns(r, d, v, n).numpy(), expected, rtol=1e-5, atol=1e-5)
