"""The dashboard in headless Chromium (Debian's chromium + chromium-driver, driven by selenium).

The server runs no jobs (`--max-running-jobs 0`); the test moves a job through its states by
writing the database directly, as a job runner would, and checks that the page follows by
polling: progress, the curve, the best schedule and its source, and cancel with a token.
Skipped when the browser is missing, except under CI (scripts/ci-deps.sh installs it).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from autosched.target.key import Target
from tests.support.service_helpers import TOKEN, ApiServer, job_body
from tuning_db import TuningDB, sqlite_url
from tuning_db.types import RecordIn

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def _require_browser() -> None:
    missing = [p for p in (CHROMIUM, DRIVER) if not os.path.exists(p)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip)")
    if missing:
        msg = f"dashboard test needs {missing}: run scripts/ci-deps.sh (apt chromium chromium-driver, pip selenium)"
        if os.environ.get("CI"):
            pytest.fail(msg + " -- CI is set, so the browser test must run", pytrace=False)
        pytest.skip(msg)


@pytest.fixture
def browser(tmp_path: Path):
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--no-first-run", "--disable-dev-shm-usage", "--window-size=1280,1400",
                f"--user-data-dir={tmp_path / 'chrome-profile'}"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=DRIVER))
    try:
        yield driver
    finally:
        driver.quit()  # stops chromedriver and the browser it started


def _wait(pred, timeout: float = 20.0, what: str = ""):
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Exception as exc:  # noqa: BLE001  the DOM is being rebuilt by the poller
            last = exc
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what} (last error: {last})")


def _click(find, what: str) -> None:
    """Find and click in one retried step: a poll that changed the data rebuilds the rows, and an
    element found just before is then stale."""
    def attempt() -> bool:
        find().click()
        return True
    _wait(attempt, what=f"a click on {what}")


def test_dashboard_follows_a_job_and_shows_best_schedules(browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    db_url = sqlite_url(tmp_path / "dash.db")
    server = ApiServer(db_url, tmp_path, max_running_jobs=0)
    server.start()
    try:
        with server.client() as c:
            job = c.post("/v1/jobs", json=job_body("matmul", [16, 16, 16], trials=8)).json()
            other = c.post("/v1/jobs", json=job_body("softmax", [8, 16], trials=8)).json()
        browser.get(server.url + "/dashboard")
        rows = lambda: browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")  # noqa: E731
        _wait(lambda: len(rows()) == 2, what="two job rows")
        assert "queued" in browser.find_element(By.ID, "jobs").text

        db = TuningDB(db_url)
        tk = Target.parse("cpu").key
        db.update_job(job["id"], state="running", trials_done=3, best_median=2e-4)
        split = lambda f: [{"kind": "split", "stage": "C", "loop": "i", "factors": [16 // f, f],  # noqa: E731
                            "version": 1}]
        db.commit_records([RecordIn(job["workload_key"], tk, split(f), (m, m), job_id=job["id"])
                           for f, m in ((2, 4e-4), (4, 3e-4), (8, 2e-4))])
        row = lambda: next(r for r in rows() if r.get_attribute("data-id") == job["id"]).text  # noqa: E731
        _wait(lambda: "running" in row() and "3/8" in row(), what="live progress 3/8")
        db.update_job(job["id"], state="done", trials_done=8, best_median=1e-4)
        db.commit_record(RecordIn(job["workload_key"], tk, [], (1e-4,), job_id=job["id"]))
        db.close()
        _wait(lambda: "done" in row() and "8/8" in row(), what="the job done")

        _click(lambda: next(r for r in rows() if r.get_attribute("data-id") == job["id"]), "the done job's row")
        path = _wait(lambda: browser.find_element(By.ID, "curve-path").get_attribute("d"), what="the curve")
        assert path.count("L") == 3  # 4 records: M + 3 segments
        assert "matmul" in browser.find_element(By.ID, "curve-title").text

        best = _wait(lambda: browser.find_elements(By.CSS_SELECTOR, "#best tbody tr"), what="best schedules")
        assert "matmul" in best[0].text and "0.1000" in best[0].text
        _click(lambda: browser.find_elements(By.CSS_SELECTOR, "#best tbody tr")[0].find_element(By.TAG_NAME, "button"),
               "the best schedule's source button")
        src = _wait(lambda: browser.find_element(By.ID, "source").text, what="the source")
        _wait(lambda: "default_function" in browser.find_element(By.ID, "source").text, what="generated C")
        assert src

        # cancel without a token fails visibly; with the token it cancels
        orow = lambda: next(r for r in rows() if r.get_attribute("data-id") == other["id"])  # noqa: E731
        _click(lambda: orow().find_element(By.TAG_NAME, "button"), "cancel without a token")
        _wait(lambda: "401" in browser.find_element(By.ID, "msg").text, what="the 401 message")
        time.sleep(2.5)  # a poll later, the refusal is still shown: only the next action clears it
        assert "401" in browser.find_element(By.ID, "msg").text
        tok = browser.find_element(By.ID, "token")
        tok.send_keys(TOKEN)
        browser.execute_script("document.getElementById('token').dispatchEvent(new Event('change'))")
        _click(lambda: orow().find_element(By.TAG_NAME, "button"), "cancel with the token")
        _wait(lambda: "cancelled" in orow().text, what="the job cancelled from the page")
        with server.client() as c:
            assert c.get(f"/v1/jobs/{other['id']}").json()["state"] == "cancelled"
        browser.save_screenshot(str(tmp_path / "dashboard.png"))
        assert (tmp_path / "dashboard.png").stat().st_size > 10_000
    finally:
        server.stop()
