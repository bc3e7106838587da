"""A real headless browser for the journeys: Chromium and its driver from the system's packages, driven
by Selenium (never a browser or driver downloaded by Selenium Manager). Missing ones are installed with
apt-get when the tests run as root on a Debian-like machine (as CI does); anywhere else the test fails
with one line saying what to install."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from selenium import webdriver

PACKAGES = ("chromium", "chromium-driver")
"""Debian's packages for the browser and its driver."""

TEXTUAL_TERMINAL = """
Object.defineProperty(Object.prototype, 'fitAddon', {configurable: true, set(value) {
  Object.defineProperty(this, 'fitAddon', {value, writable: true, configurable: true, enumerable: true});
  window.__textualTerminal = this;
}});
"""
"""Run before textual-serve's page: keeps a reference to its terminal object (which sets ``fitAddon``
first), so a test can read the rows xterm.js draws on its canvas."""

ROWS = """
const t = window.__textualTerminal && window.__textualTerminal.terminal;
if (!t) return null;
const b = t.buffer.active, rows = [];
for (let i = 0; i < t.rows; i++) {
  const line = b.getLine(b.viewportY + i);
  rows.push(line ? line.translateToString(true) : '');
}
return rows;
"""
"""The terminal's rows as text, top to bottom (null before the page made its terminal)."""


def _programs() -> tuple[str | None, str | None]:
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
    return browser, shutil.which("chromedriver")


def chromium() -> tuple[str, str]:
    """The browser's and the driver's paths, installed from the system's packages first if need be."""
    browser, driver = _programs()
    why = ""
    if (browser is None or driver is None) and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for step in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *PACKAGES]):
            done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=900, check=False)
            if done.returncode != 0:
                last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
                why = f"; `{' '.join(step)}` failed: {last[0]}"
                break
        browser, driver = _programs()
    if browser is None or driver is None:
        pytest.fail(
            "Chromium and its driver are needed for the browser journeys: install them "
            f"(Debian/Ubuntu: sudo apt-get install {' '.join(PACKAGES)}){why}",
            pytrace=False,
        )
    return browser, driver


@contextmanager
def headless_browser(width: int = 1280, height: int = 800) -> Iterator[webdriver.Chrome]:
    """A headless Chromium window of ``width`` x ``height`` that resolves no host but this machine's.
    Selenium (the ``browser`` extra) is imported here, so that a run without it still collects."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    ):
        options.add_argument(argument)
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager never fetches anything
    chrome = webdriver.Chrome(options=options, service=Service(driver))
    try:
        chrome.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": TEXTUAL_TERMINAL})
        yield chrome
    finally:
        chrome.quit()


def terminal_rows(chrome: webdriver.Chrome) -> list[str]:
    """The rows textual-serve's terminal shows now (none before it exists)."""
    rows = chrome.execute_script(ROWS)
    return [str(row) for row in rows] if rows else []
