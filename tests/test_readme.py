"""The README's library example runs as printed, in a fresh interpreter, and loads no plotting or
widget stack: what a researcher who reads only the README types first."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_example_runs_and_prints_what_its_comments_say(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    example = next(b for b in blocks if "import torch, kvattn" in b)
    loaded = "{m.split('.')[0] for m in sys.modules} & {'plotly', 'ipywidgets'}"
    check = f"\nimport sys\nprint(sorted({loaded}))\n"
    out = subprocess.run(
        [sys.executable, "-c", example + check],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("0.5946")
    assert lines[1] == "torch.Size([1, 4, 32, 32])"
    assert lines[-1] == "[]"
    assert (tmp_path / "my_copy" / "model.safetensors").exists()
