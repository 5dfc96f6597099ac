"""QR-DQN: quantile regression at fixed fractions, on IQN's replay, targets and loss."""
