#!/usr/bin/env python3
"""The live dashboard (issue 23) in a real headless browser: Debian's chromium driven by
chromium-driver through Debian's python3-selenium, against a real `rapide serve` on
stories260K. No browser is downloaded.

usage: dashboard_browser_test.py RAPIDE_BINARY SHARED_DIR

* The page loads (GET / redirects to it) with no console error, and polls its state.
* Charts update while a load runs: the tokens/s, running and TTFT series get values > 0.
* Two prompts that differ by a timestamp show a near-miss record: both texts side by side,
  the differing digit marked in each.
* The playground streams a reply (several pieces) whose text is the server's own
  non-streamed answer to the same greedy request, with TTFT/TPOT and a curl command.
* Behind --api-key the page asks for the key, refuses a wrong one, works with the right one
  and keeps it for the tab (a reload does not ask again); the state endpoint is 401 without.
* Phone width (no sideways scrolling) and dark mode (prefers-color-scheme) render.

Every step saves a screenshot under dashboard-screenshots/ in the working directory (the
build dir under ctest: CI keeps it as an artifact). A missing chromium, chromedriver or
selenium follows tests/require_shared.py: it fails under CI and skips elsewhere.
"""
import http.client
import json
import os
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, report  # noqa: E402
from require_shared import missing_prerequisite, require_shared, shared_dir  # noqa: E402
from serve_fixture import RapideServer  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MODEL = os.path.join(SHARED, "models/stories260K/stories260K.gguf")
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SHOTS = os.path.abspath("dashboard-screenshots")
KEY = "sk-dashboard-test"

require_shared(SHARED, "models/stories260K/stories260K.gguf")
for tool in (CHROMIUM, CHROMEDRIVER):
    if not shutil.which(tool):
        missing_prerequisite(f"{tool} is not installed (apt-get install chromium chromium-driver)")
try:
    import selenium  # noqa: F401
except ImportError:
    # Debian's python3-selenium, when the tests run under another python3 (e.g. pyenv's).
    sys.path.append("/usr/lib/python3/dist-packages")
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing_prerequisite("python3-selenium is not installed")
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402


def browser(width=1280, height=1500):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def wait_for(condition, timeout=20.0, step=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step)
    return condition()


def polls(driver):
    return int(driver.execute_script("return Number(document.body.dataset.polls || 0)"))


def console_errors(driver, ignore=()):
    return [e for e in driver.get_log("browser")
            if e["level"] == "SEVERE" and not any(i in e["message"] for i in ignore)]


def shot(driver, name):
    os.makedirs(SHOTS, exist_ok=True)
    path = os.path.join(SHOTS, name + ".png")
    driver.save_screenshot(path)
    print(f"screenshot: {path}", flush=True)


def series(driver, chart, index):
    """The values of one series of a chart, as the page keeps them (nulls dropped)."""
    values = driver.execute_script(f"return charts['{chart}'].data[{index}]")
    return [v for v in values if v is not None]


class Load:
    """N threads streaming completions until stopped."""

    def __init__(self, port, streams=8):
        self.port, self.stop, self.done = port, threading.Event(), 0
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(streams)]

    def run(self, i):
        while not self.stop.is_set():
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            body = {"prompt": f"Once upon a time {i}", "max_tokens": 96, "temperature": 1,
                    "stream": True}
            conn.request("POST", "/v1/completions", json.dumps(body),
                         {"Content-Type": "application/json"})
            conn.getresponse().read()
            conn.close()
            self.done += 1

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join()


def check_live_page(server, driver):
    driver.get(server.url("/"))
    check(driver.current_url.endswith("/dashboard"), f"/ redirects to /dashboard: {driver.current_url}")
    check(wait_for(lambda: polls(driver) >= 2), "the page polls its state")
    check(driver.find_element(By.ID, "model").text == "stories260K", "the page names the model")
    check(driver.find_element(By.ID, "t-spec").text == "not available",
          "speculative acceptance reads 'not available' with --spec off")
    errors = console_errors(driver)
    check(not errors, f"no console errors on load: {errors}")
    shot(driver, "01-idle")


def check_charts_update(server, driver):
    before = polls(driver)
    with Load(server.port) as load:
        wait_for(lambda: polls(driver) >= before + 5 and load.done >= 8, timeout=60)
        running = max(series(driver, "c-requests", 1), default=0)
        out = max(series(driver, "c-tokens", 2), default=0)
        ttft = max(series(driver, "c-ttft", 1), default=0)
        rows = max(series(driver, "c-rows", 2), default=0)
        tile = driver.find_element(By.ID, "t-running").text
        shot(driver, "02-under-load")
    check(load.done >= 8, f"the load completed requests ({load.done})")
    check(running > 0, f"the running-requests chart rose during the load (max {running})")
    check(out > 0, f"the tokens/s out chart rose during the load (max {out:.0f})")
    check(ttft > 0, f"the TTFT p50 chart has values (max {ttft:.2f} ms)")
    check(rows > 0, f"the decode rows per step chart has values (max {rows:.1f})")
    check(tile.isdigit(), f"the running tile shows a count: {tile!r}")
    errors = console_errors(driver)
    check(not errors, f"no console errors under load: {errors}")


def check_near_miss(server, driver):
    story = ("Once upon a time there was a little girl named Lily. She loved to play outside "
             "in the park with her friends. Time: {}. One day she saw a big red ball in the "
             "tree and wanted to play with it.")
    for stamp in ("2026-12-01 10:00:01", "2026-12-01 10:00:07"):
        status, _, _ = server.curl("/v1/completions",
                                   {"prompt": story.format(stamp), "max_tokens": 2})
        check(status == 200, f"prompt with timestamp {stamp}: {status}")
    found = wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#near-misses .miss"))
    check(bool(found), "a near-miss record appears after two prompts differing by a timestamp")
    if not found:
        return
    record = found[0]
    texts = record.find_elements(By.CSS_SELECTOR, ".pair pre")
    marks = [m.text for m in record.find_elements(By.CSS_SELECTOR, ".pair mark")]
    check(len(texts) == 2, "the record shows two texts side by side")
    check(marks == ["7", "1"], f"the first difference is marked in each: {marks}")
    check(len(texts) == 2 and all("10:00:0" in t.text for t in texts),
          f"both texts start with the shared text before the difference: {[t.text for t in texts]}")
    driver.execute_script("arguments[0].scrollIntoView()", record)
    shot(driver, "03-near-miss")
    driver.execute_script("window.scrollTo(0, 0)")


def check_playground(server, driver):
    question = "Tell me a story about a cat"
    status, _, body = server.curl("/v1/chat/completions", {
        "messages": [{"role": "user", "content": question}], "max_tokens": 48,
        "temperature": 0, "top_p": 1})
    expected = json.loads(body)["choices"][0]["message"]["content"] if status == 200 else None
    driver.find_element(By.CSS_SELECTOR, ".tab[data-view=playground]").click()
    for field, value in (("p-temperature", "0"), ("p-max-tokens", "48")):
        element = driver.find_element(By.ID, field)
        element.clear()
        element.send_keys(value)
    driver.find_element(By.ID, "chat-input").send_keys(question)
    curl = driver.find_element(By.ID, "curl").text
    check("/v1/chat/completions" in curl and '"stream":true' in curl and question in curl,
          f"the curl command holds the request: {curl}")
    driver.find_element(By.ID, "chat-send").click()
    reply = wait_for(lambda: driver.find_elements(
        By.CSS_SELECTOR, ".msg.assistant[data-state=done]"), timeout=30)
    check(bool(reply), "the playground's reply completes")
    if not reply:
        shot(driver, "04-playground-failed")
        return
    reply = reply[0]
    text = reply.find_element(By.CSS_SELECTOR, ".content").text
    chunks = int(reply.get_attribute("data-chunks") or 0)
    timing = reply.find_element(By.CSS_SELECTOR, ".timing").text
    check(chunks > 1, f"the reply streamed in {chunks} pieces")
    check(expected is not None and text.strip() == expected.strip(),
          f"the streamed reply is the server's greedy answer: {text!r} vs {expected!r}")
    check("TTFT" in timing and "TPOT" in timing, f"the reply shows TTFT and TPOT: {timing!r}")
    errors = console_errors(driver)
    check(not errors, f"no console errors in the playground: {errors}")
    shot(driver, "04-playground")
    driver.find_element(By.CSS_SELECTOR, ".tab[data-view=live]").click()


def check_phone_and_dark(server):
    driver = browser(390, 844)
    try:
        # A phone's viewport: a headless window does not shrink below 500 px by itself.
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
            "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        driver.get(server.url("/dashboard"))
        wait_for(lambda: polls(driver) >= 2)
        overflow = driver.execute_script(
            "return document.documentElement.scrollWidth - window.innerWidth")
        check(overflow <= 0, f"no sideways scrolling at phone width ({overflow} px)")
        background = driver.execute_script(
            "return getComputedStyle(document.body).backgroundColor")
        rgb = [int(x) for x in background[background.index("(") + 1:-1].split(",")[:3]]
        check(sum(rgb) < 3 * 80, f"dark mode gives a dark background: {background}")
        check(not console_errors(driver), "no console errors at phone width in dark mode")
        shot(driver, "05-phone-dark")
    finally:
        driver.quit()


def check_api_key_gate():
    with RapideServer(BINARY, ["-m", MODEL, "--api-key", KEY]) as server:
        status, _, _ = server.curl("/dashboard/state")
        check(status == 401, f"/dashboard/state without the key is 401: {status}")
        status, _, _ = server.curl("/dashboard/state", key=KEY)
        check(status == 200, f"/dashboard/state with the key is 200: {status}")
        status, _, _ = server.curl("/dashboard")
        check(status == 200, f"the page itself needs no key (it asks for it): {status}")
        driver = browser()
        try:
            driver.get(server.url("/dashboard"))
            gate = driver.find_element(By.ID, "key-gate")
            check(wait_for(gate.is_displayed), "the page asks for the API key")
            check(not driver.find_element(By.ID, "live").is_displayed(),
                  "nothing is shown before the key")
            shot(driver, "06-key-gate")
            driver.find_element(By.ID, "key-input").send_keys("wrong-key")
            driver.find_element(By.CSS_SELECTOR, "#key-form button").click()
            check(wait_for(driver.find_element(By.ID, "key-error").is_displayed),
                  "a wrong key is refused")
            driver.find_element(By.ID, "key-input").send_keys(KEY)
            driver.find_element(By.CSS_SELECTOR, "#key-form button").click()
            check(wait_for(lambda: polls(driver) >= 2), "with the right key the page polls")
            check(not gate.is_displayed(), "the gate hides once the key is accepted")
            driver.refresh()
            check(wait_for(lambda: polls(driver) >= 1), "a reload keeps the key (sessionStorage)")
            check(not driver.find_element(By.ID, "key-gate").is_displayed(),
                  "a reload does not ask again")
            # Only the 401s the gate itself provoked may appear in the console.
            errors = console_errors(driver, ignore=("401",))
            check(not errors, f"no other console errors behind the key: {errors}")
            shot(driver, "07-key-accepted")
        finally:
            driver.quit()


def main():
    with RapideServer(BINARY, ["-m", MODEL, "--prefix-cache", "on"]) as server:
        driver = browser()
        try:
            check_live_page(server, driver)
            check_charts_update(server, driver)
            check_near_miss(server, driver)
            check_playground(server, driver)
        finally:
            driver.quit()
        check_phone_and_dark(server)
    check_api_key_gate()
    return report()


if __name__ == "__main__":
    sys.exit(main())
