"""Benchmarks of the course's expensive work (not tests): `make bench`, or `python -m bench --help`."""
