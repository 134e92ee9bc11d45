"""Ridgeline: places each GPU on its card's roofline and tells Prometheus which wall it hits."""

__version__ = "0.1.0"
