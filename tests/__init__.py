"""The test suite. A package so that its helpers import as `tests.support.<module>` (the repository
root is on sys.path through `pythonpath` in pyproject's [tool.pytest.ini_options]).

Test folders mirror autosched's packages and have no `__init__.py`: test modules are imported by
basename, so every `test_*.py` name must be unique across folders."""
