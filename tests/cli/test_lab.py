"""``mxcompat lab`` in a real browser: headless Chromium (Debian's) driven by Selenium against 127.0.0.1 + token."""

from __future__ import annotations

import pytest
from conftest import NEWEST, OLDEST, run_cli
from lab_driver import Lab, browser_missing, chromium, launcher_kernels, open_notebook, run_new_cell

pytestmark = pytest.mark.envs


@pytest.fixture(scope="module")
def lab_run(built_envs, kit_home, tmp_path_factory):
    """A small real run (mlp export, saved by the oldest release, reloaded by both) the lab serves."""
    if browser_missing():
        pytest.skip(browser_missing())
    runs = tmp_path_factory.mktemp("lab-runs")
    store = tmp_path_factory.mktemp("lab-store")
    proc = run_cli(
        "run", "--runs-dir", str(runs), "--store", str(store), "--run-id", "lab",
        "--save", OLDEST, "--load", f"{OLDEST},{NEWEST}", "--models", "mlp", "--apis", "export",
        home=kit_home,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return runs


def test_jupyterlab_offers_every_release_kernel_and_runs_a_cell_in_each(lab_run, built_envs, kit_home, tmp_path):
    from kit.envs.kernelspecs import kernel_names, read_kernelspec
    from kit.home import KitHome

    home = KitHome(kit_home)
    expected = {name: read_kernelspec(home, name)["display_name"] for name in kernel_names(home)}
    assert {f"mxnet-{OLDEST}", f"mxnet-{NEWEST}"} <= set(expected), expected

    with Lab(kit_home, lab_run, tmp_path / "lab.log") as lab:
        driver = chromium(tmp_path / "profile")
        try:
            cards = launcher_kernels(driver, lab)
            # one notebook card per kernel the kit registered (and the host's own Python 3 kernel)
            assert set(expected.values()) <= set(cards), (cards, expected)
            releases = {v for k, v in expected.items() if k.startswith("mxnet-")}
            assert {c for c in cards if c.startswith("MXNet ")} == releases  # each once, none the kit did not build
            assert len(cards) == len(set(cards))
            for release in (OLDEST, NEWEST):
                probe = built_envs[release]["probe"]  # what `env create` measured inside the environment
                python = ".".join(probe["python"].split(".")[:2])
                shown = open_notebook(driver, lab, f"lab/reload/mxnet-{release}.ipynb")
                assert shown == expected[f"mxnet-{release}"] == f"MXNet {release} (Python {python})"
                out = run_new_cell(
                    driver,
                    "import mxnet as mx, sys; print('mxnet', mx.__version__, 'python %d.%d' % sys.version_info[:2])",
                    f"mxnet {probe['mxnet']}",
                )
                assert out.strip() == f"mxnet {probe['mxnet']} python {python}", out
        except Exception:
            driver.save_screenshot(str(tmp_path / "failure.png"))
            raise
        finally:
            driver.quit()
