"""A real ``gpucon serve`` and a real headless Chromium for tests of the wall in a browser.

``served_wall`` runs ``gpucon serve`` as a child process on a free loopback port. ``Browser``
drives Debian's ``chromium`` through its matching ``chromedriver`` with Selenium (one pure
Python wheel; the driver comes from the same Debian source as the browser, so their versions
always agree, where Playwright would bring its own Node driver and expect its own browser
build).

Reading the page: textual.js draws the terminal with xterm.js on a canvas, so the DOM holds no
text. xterm keeps what it drew in its buffer; textual.js keeps its terminal in a local
variable. A script run before the page's own catches that object the first time it sets its
``fitAddon`` (a setter on ``Object.prototype``, removed from the object at once) and keeps it
as ``window.__textual``: ``screen_text`` then reads xterm's own buffer, row by row.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from tests.helpers.servers import free_port, wait_until

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
MISSING = (
    None
    if CHROMIUM and CHROMEDRIVER
    else "headless Chromium is not installed (apt-get install -y chromium chromium-driver; "
    "scripts/test installs it)"
)

_CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, "fitAddon", {
  configurable: true,
  set(value) {
    window.__textual = this;
    Object.defineProperty(this, "fitAddon",
      {value: value, writable: true, configurable: true, enumerable: true});
  },
});
"""

_SCREEN_TEXT = """
const t = window.__textual && window.__textual.terminal;
if (!t) return null;
const buffer = t.buffer.active, rows = [];
for (let i = 0; i < t.rows; i++) {
  const line = buffer.getLine(buffer.viewportY + i);
  rows.push(line ? line.translateToString(true) : "");
}
return rows.join("\\n");
"""


class ServedWall:
    """A running ``gpucon serve``; ``restart()`` stops it and starts it again on its port."""

    def __init__(self, args: Sequence[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.argv = [sys.executable, "-m", "gpucon.commands.cli", "serve", "--port"]
        self.argv += [str(self.port), *args]
        self.log = log
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env
            )
        wait_until(self.answers, timeout_s=20, what="gpucon serve")

    def answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"gpucon serve exited: {self.log.read_text()[-2000:]}")
        return httpx.get(self.url, timeout=1.0).status_code in (200, 503)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            raise AssertionError("gpucon serve did not stop on SIGTERM in 15 s") from None
        finally:
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def consoles(self) -> list[int]:
        """The console processes it runs now (one per viewer)."""
        assert self.proc is not None
        out = subprocess.run(
            ["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True, check=False
        )
        return [int(pid) for pid in out.stdout.split()]


@contextlib.contextmanager
def served_wall(
    args: Sequence[str], log: Path, env: dict[str, str] | None = None
) -> Iterator[ServedWall]:
    wall = ServedWall(args, log, env)
    wall.start()
    try:
        yield wall
    finally:
        wall.stop()


class Browser:
    """One headless Chromium window, sized like a small wall screen."""

    def __init__(self, width: int = 1600, height: int = 1000) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        assert CHROMIUM and CHROMEDRIVER, MISSING
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
            options.add_argument(arg)
        options.add_argument("--disable-gpu")
        options.add_argument(f"--window-size={width},{height}")
        self.driver: Any = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        self.driver.execute_cdp_cmd(
            "Page.addScriptToEvaluateOnNewDocument", {"source": _CATCH_TERMINAL}
        )

    def open(self, url: str) -> None:
        self.driver.get(url)

    def screen_text(self) -> str:
        """What xterm.js shows now, one line per row ("" before the terminal exists)."""
        text = self.driver.execute_script(_SCREEN_TEXT)
        return text if isinstance(text, str) else ""

    def banner(self) -> str:
        """The page's own notice (connection lost, wall full), "" while hidden."""
        text = self.driver.execute_script(
            "const e = document.getElementById('lost');"
            "return e && document.body.classList.contains('-lost') ? e.textContent : '';"
        )
        return text if isinstance(text, str) else ""

    def wait_for(
        self, check: Callable[[str], bool], timeout_s: float = 20.0, what: str = "the page"
    ) -> str:
        """The screen's text once ``check`` holds for it; AssertionError with the last text."""
        deadline = time.monotonic() + timeout_s
        text = ""
        while time.monotonic() < deadline:
            text = self.screen_text()
            if check(text):
                return text
            time.sleep(0.1)
        raise AssertionError(f"{what} not seen in {timeout_s:.0f}s; the screen was:\n{text}")

    def press(self, *keys: str) -> None:
        """Type into the terminal (xterm.js reads keys from its hidden textarea)."""
        from selenium.webdriver.common.by import By

        area = self.driver.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea")
        for key in keys:
            area.send_keys(key)
            time.sleep(0.05)

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        assert self.driver.save_screenshot(str(path)), f"no screenshot at {path}"
        return path

    def close(self) -> None:
        self.driver.quit()


@contextlib.contextmanager
def browser() -> Iterator[Browser]:
    b = Browser()
    try:
        yield b
    finally:
        b.close()


def artifact_dir(tmp_path: Path) -> Path:
    """Where a test keeps what a person may want to look at afterwards (screenshots):
    ``$GPUCON_TEST_ARTIFACTS`` (scripts/test sets ``test-artifacts/``), else the test's tmp
    directory (pytest keeps the last three runs')."""
    chosen = os.environ.get("GPUCON_TEST_ARTIFACTS")
    path = Path(chosen) if chosen else tmp_path / "artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path
