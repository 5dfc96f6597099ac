"""`python compare_gradients.py A.npz B.npz`: per variable, the relative difference and cosine of two
trees' gradients (gradients_of_a_tree.py), after checking that both started from the same weights."""
import sys

import numpy as np

a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
n = len(a.files) // 2
for i in range(n):
    assert np.array_equal(a[f"arr_{i + n}"], b[f"arr_{i + n}"]), "different weights"
    ga, gb = a[f"arr_{i}"], b[f"arr_{i}"]
    relative = np.linalg.norm(ga - gb) / max(np.linalg.norm(gb), 1e-30)
    cosine = float((ga * gb).sum() / max(np.linalg.norm(ga) * np.linalg.norm(gb), 1e-30))
    norms = f"{np.linalg.norm(ga):.4g} / {np.linalg.norm(gb):.4g}"
    print(f"{i} {ga.shape} norms {norms} relative {relative:.3g} cos {cosine:.5f}")
