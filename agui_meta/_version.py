"""The version of agui-meta: the one source (``agui_meta.__version__``, the wheel's metadata)."""

__version__ = "0.1.0"
