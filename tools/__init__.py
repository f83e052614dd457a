"""Build and test helpers for the course (used by the Makefile and the test suite)."""
