"""dynid: identify the physical parameters of robots and the objects they handle."""

__version__ = "0.1.0"

__all__ = ["__version__"]
