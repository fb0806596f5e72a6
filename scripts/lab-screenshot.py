"""Screenshot JupyterLab's launcher as ``mxcompat lab`` shows it, for the README (docs/lab-launcher.png).

Uses the kit home's built environments (MXCOMPAT_HOME or .kit) and the browser of ``make browser``:

    .venv/bin/python scripts/lab-screenshot.py [--out docs/lab-launcher.png] [--notebook RUN/reload/mxnet-1.9.1.ipynb]

With --notebook (relative to runs/), a second screenshot of that executed notebook is written beside it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from lab_driver import Lab, browser_missing, chromium, launcher_kernels, open_notebook  # noqa: E402

from kit.home import KitHome  # noqa: E402
from kit.results.runs import default_runs_dir  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "lab-launcher.png")
    parser.add_argument("--notebook", help="an executed notebook under runs/ to screenshot too")
    args = parser.parse_args()
    if browser_missing():
        print(f"lab-screenshot: {browser_missing()}", file=sys.stderr)
        return 2
    home = KitHome()
    with tempfile.TemporaryDirectory() as tmp, Lab(home.root, default_runs_dir(), Path(tmp) / "lab.log") as lab:
        driver = chromium(Path(tmp) / "profile", width=1200, height=720)
        try:
            cards = launcher_kernels(driver, lab)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(args.out))
            print(f"{args.out}: the launcher with {', '.join(cards)}")
            if args.notebook:
                kernel = open_notebook(driver, lab, args.notebook)
                notebook_png = args.out.with_name(args.out.stem + "-notebook.png")
                driver.save_screenshot(str(notebook_png))
                print(f"{notebook_png}: {args.notebook} on {kernel}")
        finally:
            driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
