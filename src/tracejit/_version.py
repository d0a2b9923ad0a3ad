"""The package version, in a module of its own so that code inside the package (the disk
cache keys its entries by it) can read it without importing ``tracejit`` itself, which
would be an import cycle."""

__version__ = "0.1.0"
