"""The `autosched` command line."""
