"""Write constraints.txt: the product's dependency closure at the versions installed here.

Run by ``make constraints``.
pip resolves what ``pip install .`` would install (no extras: neither the sandbox nor the dev tools); each
package is pinned at the version this environment has, the one the tests ran with.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = """\
# The exact versions the image installs (`pip install -c constraints.txt .` in deploy/Dockerfile): every
# package of the product's dependency closure (no sandbox, no dev tools), the versions the tests ran with, so
# two builds of the image are the same. Regenerate after changing pyproject.toml's dependencies:
#   make constraints
"""


def main() -> int:
    """Resolve, pin and write; return 0."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        subprocess.run([*pip, "--report", str(report), str(ROOT)], check=True)
        resolved = json.loads(report.read_text())["install"]
    pins = []
    for item in resolved:
        name = item["metadata"]["name"]
        if name.lower() == "spark-bot":
            continue
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = item["metadata"]["version"]
        pins.append(f"{name.lower().replace('_', '-')}=={version}")
    (ROOT / "constraints.txt").write_text(HEADER + "\n".join(sorted(pins)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
