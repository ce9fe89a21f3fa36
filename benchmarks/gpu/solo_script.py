"""Run one of solo-learn's own scripts as a user with the plugin installed runs it.

    python benchmarks/gpu/solo_script.py <solo-learn>/main_pretrain.py --config-name barlow.yaml method=mabt ...

The kit puts the checkout on ``PYTHONPATH`` rather than installing it, so Python never reads
the plugin's ``mvssl_plugin_autoregister.pth``; here the checkout is added as a site
directory, which reads it exactly as site-packages would, and the script then runs as
``__main__`` with its own folder first on ``sys.path`` (as ``python script.py`` has it).
"""

from __future__ import annotations

import runpy
import site
import sys
from pathlib import Path
from typing import List, Optional

REPO = Path(__file__).resolve().parents[2]


def main(argv: Optional[List[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or not argv[0].endswith(".py") or not Path(argv[0]).is_file():
        raise SystemExit("usage: solo_script.py <path to a solo-learn script>.py [its arguments]")
    script = Path(argv[0]).resolve()
    site.addsitedir(str(REPO))  # runs mvssl_plugin_autoregister.pth: the plugin's hook, as installed
    sys.argv = [str(script), *argv[1:]]
    sys.path.insert(0, str(script.parent))
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
