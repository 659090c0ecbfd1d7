"""hwsim's version (the package's, read by the build; a sweep's workers must all match it)."""

__version__ = "0.1.0"
