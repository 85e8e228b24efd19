"""Headless Chromium through Selenium and Debian's chromedriver, for the browser suites
(smoke/console.py, smoke/camera.py). Importing this module imports selenium: the .venv of
`make test-deps` has it."""
import shutil

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def chromium(profile, *arguments, prefs=None, script_timeout=30):
    """A headless Chromium (1280x900) with its own profile folder, the browser console's log kept
    (driver.get_log("browser")), `arguments` added to its command line and `prefs` set."""
    options = webdriver.ChromeOptions()
    if prefs:
        options.add_experimental_option("prefs", prefs)
    options.binary_location = CHROMIUM
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                     "--window-size=1280,900", *arguments, f"--user-data-dir={profile}"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(script_timeout)
    return driver
