"""The one version of the CLI and the package: CMakeLists.txt's project(VERSION), checked equal by
tests/python/test_package.py and read by pyproject.toml."""
__version__ = "0.1.0"
