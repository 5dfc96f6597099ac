"""R2D2: prioritized sequence replay, the loss, the agent and its replay trainer (Kapturowski et al., 2019)."""
