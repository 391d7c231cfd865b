"""``python -m jitgrad.kernels.vmath [--check]``: regenerate the flattened kernel math.

``f32.py`` and ``f64.py`` are generated from the helper implementations (``_exp.py``,
``_log.py``...) with every helper call inlined in source (``_flatten.py``); run this after
changing them. ``--check`` only reports whether the checked-in files are up to date (``make
test`` runs it; a test does too).
"""

from __future__ import annotations

import sys
from pathlib import Path


def generate_math(dtype: str) -> str:
    """Source of the flattened kernel-math module for ``dtype`` ("f32" or "f64")."""
    from ._build import generate
    from ._consts import F32, F64

    return generate({"f32": F32, "f64": F64}[dtype])


def main(argv: list[str] | None = None) -> int:
    """Write the generated modules; ``--check`` only reports whether they are up to date."""
    argv = sys.argv[1:] if argv is None else argv
    check = "--check" in argv
    stale = []
    for dt in ("f32", "f64"):
        path = Path(__file__).parent / f"{dt}.py"
        src = generate_math(dt)
        if path.exists() and path.read_text() == src:
            continue
        stale.append(path)
        if not check:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(src)
            tmp.replace(path)
    for p in stale:
        print(("stale: " if check else "wrote: ") + str(p))
    return 1 if (check and stale) else 0


if __name__ == "__main__":
    raise SystemExit(main())
