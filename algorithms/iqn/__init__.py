"""Implicit quantile networks (IQN): a distributional DQN over replay (Dabney et al., 2018)."""
