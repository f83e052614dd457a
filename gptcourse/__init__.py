"""Reference code for the course: what each lesson builds in the open, in one importable place.

Lessons build every piece step by step, then later lessons import it from here; the tests prove the
lesson's version and this module's agree.
"""

from gptcourse.model import layernorm

__all__ = ["layernorm"]
