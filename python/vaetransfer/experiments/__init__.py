"""Experiment drivers: each builds configs, calls the compiled core and writes a run directory."""
