"""autosched."""
