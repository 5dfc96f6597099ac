"""The learner server: gRPC streams, dynamic batching, central inference and training."""
