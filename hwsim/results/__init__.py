"""Writers of a run's ``Result`` (``hwsim.timing.stats``): the text summary, the JSON summary and
the Chrome/Perfetto timeline. A result is data; these turn it into files and text.

    from hwsim.results import summary_text, write_json, write_timeline
    result = hwsim.machine("hmx").run("examples/hmx/basic_multiply.trace")
    print(summary_text(result))
    write_timeline(result, "out.json")
"""

from __future__ import annotations

import json

from hwsim.results.chrome import write_chrome as write_timeline
from hwsim.results.text import summary_text
from hwsim.traces.files import atomic_write_text


def write_json(result, path) -> None:
    """The result's summary (``Result.to_json``) as an indented JSON file, written atomically."""
    atomic_write_text(path, json.dumps(result.to_json(), indent=2) + "\n")


__all__ = ["summary_text", "write_json", "write_timeline"]
