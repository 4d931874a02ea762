"""Packaged data files (the model table)."""
