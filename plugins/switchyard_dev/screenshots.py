"""`switchyard screenshots`: the local Airflow UI and a run's report in headless Chromium.

Takes PNGs of the DAG's grid for a run, its documentation, the trigger form with the
Params, and the run report (as the api-server serves it), into .switchyard/screenshots/.
Needs the Debian packages chromium and chromium-driver and the selenium package; it
never downloads a browser or a driver. Each page's browser console errors are printed.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from switchyard_dev import local

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def chromium(width: int = 1400, height: int = 1000):
    """A headless Chromium from the system packages, with a throwaway profile."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if missing:
        raise RuntimeError(f"headless Chromium is not installed ({', '.join(missing)} missing): "
                           f"apt-get install -y chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    os.environ["SE_OFFLINE"] = "true"  # use the system's driver; never download one
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="switchyard-chromium-")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.switchyard_profile = profile
    return driver


def close(driver) -> None:
    driver.quit()
    shutil.rmtree(getattr(driver, "switchyard_profile", ""), ignore_errors=True)


def console_errors(driver) -> list[str]:
    return [e.get("message", "") for e in driver.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]


def _shoot(driver, url: str, path: Path, wait_for: str | None = None, settle: float = 3.0,
           click: list[str] | None = None, full_page: bool = False) -> list[str]:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait
    from selenium.common.exceptions import TimeoutException
    driver.get(url)
    try:
        if wait_for:
            WebDriverWait(driver, 30).until(ec.presence_of_element_located((By.XPATH, wait_for)))
        for target in click or []:
            WebDriverWait(driver, 30).until(ec.element_to_be_clickable((By.XPATH, target))).click()
            time.sleep(0.5)
    except TimeoutException:
        print(f"    {path.name}: the page did not show {click or wait_for} within 30 s; taking it as it is")
    time.sleep(settle)  # the UI fetches and lays out after the first paint
    if full_page:
        size = driver.get_window_size()
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(size["width"], min(int(height) + 120, 12000))
        time.sleep(0.5)
        driver.save_screenshot(str(path))
        driver.set_window_size(size["width"], size["height"])
    else:
        driver.save_screenshot(str(path))
    return console_errors(driver)


def capture(dag_id: str, run_id: str, out_dir: Path) -> dict[str, Path]:
    """Screenshots of the UI for one run and of its report; returns the PNGs by name."""
    from switchyard.airflow.operators import report_url
    out_dir.mkdir(parents=True, exist_ok=True)
    base = local.api_url()
    token = local.Api().token()
    driver = chromium()
    shots: dict[str, Path] = {}
    try:
        driver.get(f"{base}/api/v2/monitor/health")
        # The UI and the report route read the same JWT cookie the login page would set.
        driver.add_cookie({"name": "_token", "value": token, "path": "/"})
        run = quote(run_id, safe="")
        pages = {
            "grid": (f"{base}/dags/{dag_id}/runs/{run}", "//*[contains(., 'stats')]", None),
            "dag-docs": (f"{base}/dags/{dag_id}", None, ["//button[@aria-label='Dag Docs']"]),
            "trigger-form": (f"{base}/dags/{dag_id}", None,
                             ["//button[@aria-label='Trigger Dag']", "//button[contains(., 'What to load')]"]),
            "stats-task": (f"{base}/dags/{dag_id}/runs/{run}/tasks/stats/details", "//*[contains(., 'Run report')]", None),
            "report": (report_url(dag_id, run_id, base), "//*[@id='status']", None),
        }
        for name, (url, wait_for, click) in pages.items():
            path = out_dir / f"{name}.png"
            errors = _shoot(driver, url, path, wait_for, click=click, full_page=name == "report")
            shots[name] = path
            print(f"{path}: {url}" + (f"\n    console errors: {errors}" if errors else ""))
    finally:
        close(driver)
    return shots
