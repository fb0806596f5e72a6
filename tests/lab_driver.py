"""JupyterLab in headless Chromium: ``mxcompat lab`` on 127.0.0.1 with a token, driven by Selenium.

The browser is Debian's ``chromium`` with its ``chromedriver`` (``make browser`` installs both);
Selenium downloads nothing. The test (tests/cli/test_lab.py) and the README's screenshot
(scripts/lab-screenshot.py) share this module.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from helpers import REPO, kit_env

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook in front; others stay in the DOM
WAIT = 120  # seconds for a page, a kernel or an output to appear (2 cores, a kernel importing MXNet)


def browser_missing() -> str | None:
    """Why the browser test cannot run here, or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.path.exists(path):
            return f"{path} is missing: `make browser` installs Debian's chromium and chromium-driver"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is missing: pip install -e '.[test]'"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """``mxcompat lab`` serving ``root`` on 127.0.0.1 with a fresh token, for as long as the ``with`` lasts."""

    def __init__(self, home: Path, root: Path, log: Path):
        self.home, self.root, self.log = home, root, log
        self.port, self.token = _free_port(), secrets.token_hex(16)
        self.proc = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Lab:
        args = [
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        # a user-settings folder of its own: no "would you like news" toast over the launcher
        settings = self.log.parent / "lab-settings"
        news = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        news.parent.mkdir(parents=True, exist_ok=True)
        news.write_text('{"fetchNews": "false"}')
        env = kit_env(
            self.home,
            dict(
                os.environ,
                JUPYTER_CONFIG_DIR=str(self.log.parent / "jupyter-config"),
                JUPYTERLAB_SETTINGS_DIR=str(settings),
            ),
        )
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kit", "lab", "--", *args], env=env, cwd=REPO, stdout=log, stderr=log
            )
        deadline = time.monotonic() + WAIT
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"mxcompat lab exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=2).read()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"mxcompat lab did not answer:\n{self.log.read_text()[-3000:]}") from None
                time.sleep(0.5)

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def chromium(profile: Path, width: int = 1400, height: int = 900):
    """Headless Chromium through Debian's chromedriver, with a fresh profile and nothing phoning home."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",  # root in a container
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def _wait(driver, condition, what: str):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT, poll_frequency=0.25).until(condition, message=f"waited {WAIT}s for {what}")


def launcher_kernels(driver, lab: Lab) -> list[str]:
    """Open JupyterLab; the kernels the launcher's Notebook section offers (their display names)."""
    from selenium.webdriver.common.by import By

    driver.get(f"{lab.url}/lab?reset&token={lab.token}")  # a fresh workspace: the launcher in front
    cards = '.jp-Launcher .jp-LauncherCard[data-category="Notebook"]'
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, cards), "the launcher's notebook cards")
    time.sleep(1)  # the cards of every kernelspec render in one pass; let it finish
    return [c.get_attribute("title") for c in driver.find_elements(By.CSS_SELECTOR, cards)]


def open_notebook(driver, lab: Lab, path: str) -> str:
    """Open ``path`` (relative to the lab's root); the kernel the notebook panel shows once it is idle."""
    from selenium.webdriver.common.by import By

    # ?reset: a fresh workspace, so the notebook opened before is not restored in front of this one
    driver.get(f"{lab.url}/lab/tree/{path}?reset&token={lab.token}")
    name = path.rsplit("/", 1)[-1]

    def in_front(d):
        tabs = d.find_elements(By.CSS_SELECTOR, "#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel")
        return [t.text for t in tabs] == [name] and d.find_elements(By.CSS_SELECTOR, f"{PANEL} .jp-Cell")

    _wait(driver, in_front, f"{path} in front with its cells")

    def idle_kernel(d):
        names = [e.text for e in d.find_elements(By.CSS_SELECTOR, f"{PANEL} .jp-KernelName") if e.text]
        status = d.find_elements(By.CSS_SELECTOR, f"{PANEL} .jp-Notebook-ExecutionIndicator")
        idle = any(s.get_attribute("data-status") == "idle" for s in status)
        return names[0] if names and idle and names[0] not in ("No Kernel", "Kernel") else False

    return _wait(driver, idle_kernel, f"{path}'s kernel to be idle")


def run_new_cell(driver, code: str, expect: str) -> str:
    """Add a cell at the end of the open notebook, run it, and return its output once ``expect`` shows."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    cells = driver.find_elements(By.CSS_SELECTOR, f"{PANEL} .jp-Notebook .jp-Cell")
    cells[-1].find_element(By.CSS_SELECTOR, ".jp-InputPrompt").click()  # select the last cell (command mode)
    before = len(cells)
    ActionChains(driver).send_keys(Keys.ESCAPE).send_keys("b").perform()  # insert a cell below
    _wait(
        driver,
        lambda d: len(d.find_elements(By.CSS_SELECTOR, f"{PANEL} .jp-Notebook .jp-Cell")) > before,
        "the new cell",
    )
    ActionChains(driver).send_keys(Keys.ENTER).send_keys(code).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(
        Keys.SHIFT
    ).perform()

    def output(d):
        new = d.find_elements(By.CSS_SELECTOR, f"{PANEL} .jp-Notebook .jp-Cell")[before]
        texts = [e.text for e in new.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output")]
        return "\n".join(texts) if any(expect in t for t in texts) else False

    return _wait(driver, output, f"the new cell's output {expect!r}")
