"""tfguard: trustworthy, observable TensorFlow / Keras 3 training."""

__version__ = "0.1.0"

__all__ = ["__version__"]
