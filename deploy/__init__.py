"""Deployment: the `seedfleet` command, the one-machine launcher, images and compose files."""
