"""Runs the reference model's tests (tests/model) with `python3 -m unittest discover -s scripts/tests`."""

import unittest
from pathlib import Path

MODEL_TESTS = Path(__file__).resolve().parents[2] / "tests" / "model"


def load_tests(loader, standard_tests, pattern):
    # A loader of its own: a nested discover would change the outer one's top-level dir.
    standard_tests.addTests(unittest.TestLoader().discover(
        str(MODEL_TESTS), pattern="test_model.py", top_level_dir=str(MODEL_TESTS)))
    return standard_tests
