"""The README's Python API example runs as written (from the repository's root)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_python_api_example_runs(tmp_path, monkeypatch):
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Python API"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)                 # relative paths as from the root; outputs here
    namespace = {}
    exec(compile(code, "README.md: Python API", "exec"), namespace)
    assert namespace["result"].cycles == 72 and not namespace["result"].expect_failures
    assert namespace["out"].size == 2048 and (tmp_path / "out.json").exists()
