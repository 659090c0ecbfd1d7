"""How hard the property tests try: a quick profile by default, the thorough one with ``--all``.

Hypothesis tests that set their own ``max_examples`` pass it through ``examples``, so that the
thorough profile keeps each test's full count and the quick one runs a tenth of it (at least
10). Tests without a count take the profile's default.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("thorough", deadline=None)                  # hypothesis's 100
settings.register_profile("quick", max_examples=20, deadline=None)

QUICK_SHARE = 10
_thorough = False


def use(thorough: bool) -> None:
    """Load the thorough or the quick profile (tests/conftest.py, before collection)."""
    global _thorough
    _thorough = thorough
    settings.load_profile("thorough" if thorough else "quick")


def examples(n: int) -> int:
    """A test's example count: ``n`` when thorough, else a tenth of it (at least 10, at most n)."""
    return n if _thorough else min(n, max(10, n // QUICK_SHARE))


use(False)
