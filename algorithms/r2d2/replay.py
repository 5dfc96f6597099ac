"""Prioritized replay of whole sequences (Schaul et al., 2016; Kapturowski et al., 2019).

Item i is sampled with probability P(i) = p_i^alpha / sum_j p_j^alpha and corrects
for that with the importance weight w_i = (N * P(i))^-beta / max_{j in batch} w_j.
A sum tree holds the p_i^alpha, so sampling and updates cost O(log capacity) per item,
done level by level for a whole batch at once with NumPy; with alpha = 0 (uniform replay,
every weight 1) there is no tree to keep, and a draw is one call to the generator. The buffer is a ring: when
full, the oldest sequence is overwritten first.

Items are nests (dicts, possibly nested) of arrays with a leading batch dimension;
storage is preallocated from the first batch added, so frames stay uint8 and each
sequence's frames are stored once (stacking happens in the network).
"""

from __future__ import annotations

import numpy as np


class SumTree:
    """A complete binary tree of sums over `capacity` leaves, stored in one array."""

    def __init__(self, capacity: int):
        self.depth = self.depth_for(capacity)
        self.leaves = 1 << self.depth
        self.nodes = np.zeros(2 * self.leaves, np.float64)  # node i has children 2i, 2i+1; root 1

    @staticmethod
    def depth_for(capacity: int) -> int:
        """Levels below the root: the capacity rounded up to a power of 2 leaves."""
        return max(capacity - 1, 0).bit_length()

    @classmethod
    def nbytes_for(cls, capacity: int) -> int:
        """What the tree of `capacity` leaves takes, before allocating it: float64, 2 x leaves."""
        return 16 << cls.depth_for(capacity)

    @property
    def total(self) -> float:
        return float(self.nodes[1])

    def get(self, indices: np.ndarray) -> np.ndarray:
        return self.nodes[self.leaves + np.asarray(indices)]

    def set(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Sets leaves, then recomputes their ancestors level by level (no drift from deltas)."""
        nodes = self.leaves + np.asarray(indices, np.int64)
        self.nodes[nodes] = values
        for _ in range(self.depth):
            nodes = np.unique(nodes // 2)
            self.nodes[nodes] = self.nodes[2 * nodes] + self.nodes[2 * nodes + 1]

    def find(self, values: np.ndarray) -> np.ndarray:
        """For each v in [0, total), the leaf whose prefix-sum interval holds v."""
        nodes = np.ones(len(values), np.int64)
        values = np.array(values, np.float64)
        for _ in range(self.depth):
            left = self.nodes[2 * nodes]
            right = values >= left
            values -= np.where(right, left, 0.0)
            nodes = 2 * nodes + right
        return nodes - self.leaves


def _map(fn, nest):
    return {k: _map(fn, v) for k, v in nest.items()} if isinstance(nest, dict) else fn(nest)


def _map2(fn, a, b):
    return {k: _map2(fn, a[k], b[k]) for k in a} if isinstance(a, dict) else fn(a, b)


class PrioritizedReplay:
    def __init__(
        self,
        capacity: int,
        priority_exponent: float = 0.9,
        importance_sampling_exponent: float = 0.6,
        seed: int | None = None,
    ):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.alpha = priority_exponent
        self.beta = importance_sampling_exponent
        self.rng = np.random.default_rng(seed)
        self.tree = SumTree(capacity) if priority_exponent else None  # p^0 = 1: uniform replay keeps no tree
        self.storage: dict | None = None
        self.next_index = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def add(self, items: dict, priorities: np.ndarray) -> np.ndarray:
        """Stores a batch of sequences, evicting the oldest when full; returns their indices."""
        priorities = np.asarray(priorities, np.float64)
        n = len(priorities)
        if n > self.capacity:
            raise ValueError(f"cannot add {n} items to a replay of capacity {self.capacity}")
        if not np.all(np.isfinite(priorities)) or np.any(priorities < 0):
            raise ValueError("priorities must be finite and non-negative")
        if self.storage is None:
            self.storage = _map(lambda x: np.zeros((self.capacity, *x.shape[1:]), x.dtype), items)
        indices = (self.next_index + np.arange(n)) % self.capacity

        def write(store, x):
            if x.shape[0] != n:
                raise ValueError(f"items have {x.shape[0]} rows, priorities {n}")
            store[indices] = x

        _map2(write, self.storage, items)
        if self.tree is not None:
            self.tree.set(indices, priorities**self.alpha)
        self.next_index = int((self.next_index + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)
        return indices

    def sample(self, batch_size: int) -> tuple[np.ndarray, np.ndarray, dict]:
        """Returns (indices, importance weights, items), one stratum of the total per draw."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay")
        total = self.tree.total if self.tree is not None else 0.0
        if total <= 0:  # uniform replay, or every priority zero: sample uniformly
            indices = self.rng.integers(0, self.size, batch_size)
            probs = np.full(batch_size, 1.0 / self.size)
        else:
            values = (np.arange(batch_size) + self.rng.random(batch_size)) * (total / batch_size)
            indices = np.minimum(self.tree.find(np.minimum(values, np.nextafter(total, 0))), self.size - 1)
            probs = self.tree.get(indices) / total
        weights = (self.size * probs) ** (-self.beta)
        weights = (weights / weights.max()).astype(np.float32)
        items = _map(lambda store: store[indices], self.storage)
        return indices, weights, items

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        priorities = np.asarray(priorities, np.float64)
        if not np.all(np.isfinite(priorities)) or np.any(priorities < 0):
            raise ValueError("priorities must be finite and non-negative")
        if self.tree is not None:
            self.tree.set(np.asarray(indices), priorities**self.alpha)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Everything needed to continue: stored items (keys "items/<path>"), priorities, ring
        position. Only the filled slots, 0 .. size-1, are written: a replay far from full
        checkpoints in proportion to what it holds, not to its capacity."""
        arrays = {"position": np.asarray([self.next_index, self.size, self.capacity])}
        if self.tree is not None:
            arrays["tree"] = self.tree.nodes
        if self.storage is not None:
            arrays.update({f"items/{key}": value[:self.size] for key, value in _flatten(self.storage)})
        return arrays

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restores what `to_arrays` gave; raises ValueError if it was another capacity, or
        uniform where this one is prioritized (a uniform replay has no use for a saved tree)."""
        next_index, size, capacity = (int(v) for v in arrays["position"])
        if capacity != self.capacity:
            raise ValueError(f"the saved replay holds {capacity} sequences, this one {self.capacity}")
        if self.tree is not None and "tree" not in arrays:
            raise ValueError("the saved replay was uniform, this one is prioritized")
        items = {key[len("items/"):]: value for key, value in arrays.items() if key.startswith("items/")}
        self.storage = _unflatten({key: self._full(value) for key, value in items.items()}) if items else None
        if self.tree is not None:
            self.tree.nodes = np.array(arrays["tree"], np.float64)
        self.next_index, self.size = next_index, size

    def _full(self, filled: np.ndarray) -> np.ndarray:
        """A loaded store at full capacity: its filled slots first (checkpoints written before
        only the filled slots were saved hold the whole capacity already)."""
        if len(filled) == self.capacity:
            return np.asarray(filled)
        store = np.zeros((self.capacity, *filled.shape[1:]), filled.dtype)
        store[:len(filled)] = filled
        return store

    def bytes_per_step(self, steps_per_item: int) -> float:
        """Storage bytes per stored env step, for sizing a replay."""
        if self.storage is None:
            return 0.0
        per_item = sum(_leaves_nbytes(self.storage)) / self.capacity
        return per_item / steps_per_item


def _flatten(nest, prefix: str = "") -> list[tuple[str, np.ndarray]]:
    if isinstance(nest, dict):
        return [item for k, v in nest.items() for item in _flatten(v, f"{prefix}{k}/")]
    return [(prefix[:-1], nest)]


def _unflatten(flat: dict[str, np.ndarray]) -> dict:
    nest: dict = {}
    for path, value in flat.items():
        *parents, leaf = path.split("/")
        node = nest
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return nest


def _leaves_nbytes(nest) -> list[int]:
    if isinstance(nest, dict):
        return [n for v in nest.values() for n in _leaves_nbytes(v)]
    return [nest.nbytes]
