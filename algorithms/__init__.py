"""Learning algorithms: V-trace, the IMPALA loss and networks. Pure TensorFlow and NumPy."""
