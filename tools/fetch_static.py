"""Prepare the book's static JavaScript so that pages work with no internet.

* MathJax, require.js and the ipywidgets HTML manager are fetched from the npm registry at the
  pinned versions below, checked against the registry's sha512 integrity, and the one file the
  book needs from each is written to ``book/_static/vendor/`` (with the HTML manager, also the
  fonts its widget styles load).
* ``plotly.min.js`` is written from the installed plotly package, so it always matches the
  plotly that drew the figures.

Nothing here is committed (``book/_static/vendor/`` is git-ignored). Run by ``make``; re-running
is cheap: files already present with the right content are kept.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import io
import sys
import tarfile
import urllib.request
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "book" / "_static" / "vendor"
REGISTRY = "https://registry.npmjs.org"

# (package, version, sha512 integrity from the registry, file inside the tarball, output name,
#  pattern of further files inside the tarball written under their own names, or "")
PACKAGES = [
    (
        "requirejs",
        "2.3.8",
        "7/cTSLOdYkNBNJcDMWf+luFvMriVm7eYxp4BcFCsAX0wF421Vyce5SXP17c+Jd5otXKGNehIonFlyQXSowL6Mw==",
        "package/require.js",
        "require.js",
        "",
    ),
    (
        "@jupyter-widgets/html-manager",
        "1.0.15",
        "5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
        "package/dist/embed-amd.js",
        "embed-amd.js",
        # The Font Awesome fonts of the widget styles, which the manager loads from the folder of
        # its AMD module (book/_ext/page_fixes.py points require.js here). woff2 is what every
        # browser able to run the manager uses; woff is the fallback the styles name next.
        "package/dist/*.woff*",
    ),
    (
        "mathjax",
        "3.2.2",
        "Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
        "package/es5/tex-svg.js",
        "mathjax-tex-svg.js",
        "",
    ),
]


def tarball_url(package: str, version: str) -> str:
    name = package.split("/")[-1]
    return f"{REGISTRY}/{package}/-/{name}-{version}.tgz"


def fetch(package: str, version: str, integrity: str, member: str, out: Path, extras: str) -> None:
    # The stamp names the package, version and pattern, then each further file written.
    stamp = out.with_suffix(out.suffix + ".version")
    tag = f"{package}@{version}" + (f" {extras}" if extras else "")
    if out.exists() and stamp.exists():
        first, *written = stamp.read_text().splitlines() or [""]
        if first == tag and all((out.parent / name).exists() for name in written):
            return
    url = tarball_url(package, version)
    print(f"fetching {package}@{version} from the npm registry", flush=True)
    with urllib.request.urlopen(url, timeout=120) as response:
        blob = response.read()
    digest = base64.b64encode(hashlib.sha512(blob).digest()).decode()
    if digest != integrity:
        raise SystemExit(f"integrity check failed for {url}: got sha512-{digest}")
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        data = tar.extractfile(member)
        if data is None:
            raise SystemExit(f"{member} missing from {url}")
        out.write_bytes(data.read())
        written = []
        for info in tar.getmembers():
            if extras and info.isfile() and fnmatch.fnmatchcase(info.name, extras):
                name = PurePosixPath(info.name).name
                (out.parent / name).write_bytes(tar.extractfile(info).read())
                written.append(name)
    if extras and not written:
        raise SystemExit(f"no file matching {extras} in {url}")
    stamp.write_text("\n".join([tag, *written]))


def write_plotly() -> None:
    from plotly.offline import get_plotlyjs

    out = VENDOR / "plotly.min.js"
    js = get_plotlyjs()
    if not out.exists() or out.read_text(encoding="utf-8") != js:
        out.write_text(js, encoding="utf-8")


def main() -> int:
    VENDOR.mkdir(parents=True, exist_ok=True)
    for package, version, integrity, member, name, extras in PACKAGES:
        fetch(package, version, integrity, member, VENDOR / name, extras)
    write_plotly()
    return 0


if __name__ == "__main__":
    sys.exit(main())
