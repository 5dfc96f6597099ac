"""PQN: parallel Q-learning with Q(lambda) targets and no replay (Gallici et al., 2024)."""
