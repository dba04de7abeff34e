"""The live dashboard `infrasim up` serves, proved with clients nobody here wrote: urllib3
for its HTTPS and one-time login links, and Debian's Chromium (through chromedriver and
selenium) for the page itself: it loads without a console error, shows a cluster made with
kubectl after it loaded, and opens that cluster's tree.

The page's screenshots are kept in target/e2e-artifacts/ (or $INFRASIM_ARTIFACTS):
dashboard.png (the list and the tree) and dashboard-charts.png (the charts)."""

import json
import os
import pathlib
import subprocess

import pytest
import urllib3

from conftest import BINARY, ROOT, unique, wait_for

ARTIFACTS = pathlib.Path(os.environ.get("INFRASIM_ARTIFACTS", ROOT / "target" / "e2e-artifacts"))
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

CLUSTER = """
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: NAME, namespace: NS}
spec:
  clusterNetwork:
    pods: {cidrBlocks: [192.168.0.0/16]}
    services: {cidrBlocks: [10.128.0.0/12]}
  topology:
    classRef: {name: in-memory}
    version: v1.31.2
    controlPlane: {replicas: 1}
    workers:
      machineDeployments:
      - {class: default-worker, name: md-0, replicas: 1}
"""


def login_link(plane):
    """A fresh link, as a user gets one: `infrasim dashboard --kubeconfig`."""
    made = subprocess.run([BINARY, "dashboard", "--kubeconfig", plane.kubeconfig],
                          capture_output=True, text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    link = made.stdout.strip()
    assert link.startswith("https://127.0.0.1:") and "/login?token=" in link, link
    return link


def verified(plane):
    """An HTTPS pool that trusts only the plane's CA: the dashboard's certificate is the
    plane's, for the address it listens on."""
    return urllib3.PoolManager(cert_reqs="CERT_REQUIRED",
                               ca_certs=plane.client.configuration.ssl_ca_cert, retries=False)


def test_links_open_one_session_once_and_nothing_is_served_without_one(plane):
    link = login_link(plane)
    base = link.split("/login")[0]
    http = verified(plane)
    assert http.request("GET", base + "/api/clusters").status == 401
    page = http.request("GET", base + "/")
    assert page.status == 401 and b"infrasim dashboard --kubeconfig" in page.data

    opened = http.request("GET", link, redirect=False)
    assert opened.status == 303 and opened.headers["Location"] == "/"
    cookie = opened.headers["Set-Cookie"]
    for attribute in ("Secure", "HttpOnly", "SameSite=Strict"):
        assert attribute in cookie, cookie
    session = {"Cookie": cookie.split(";")[0]}
    again = http.request("GET", link, redirect=False)
    assert again.status == 401 and b"used already" in again.data, again.data

    listed = http.request("GET", base + "/api/clusters?limit=1", headers=session)
    assert listed.status == 200, listed.data
    assert set(json.loads(listed.data)) == {"total", "offset", "items"}
    assert http.request("POST", base + "/api/clusters", headers=session).status == 405
    for header in ("Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy"):
        assert header in listed.headers, header
    assert http.request("GET", base + "/api/clusters/nowhere/none", headers=session).status == 404
    # A token that was never minted, and one that is not a token at all.
    forged = link[: link.index("=") + 1] + "abcdef." + "0" * 32
    assert http.request("GET", forged, redirect=False).status == 401
    assert http.request("GET", base + "/login?token=nonsense", redirect=False).status == 401


def fresh(browser, act):
    """`act()`, or False when the element it used was replaced or is not there yet."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    try:
        return act()
    except (NoSuchElementException, StaleElementReferenceException):
        return False


@pytest.fixture
def browser():
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.fail("Debian's chromium and chromium-driver are required (scripts/test-all installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1400,1900"):
        options.add_argument(arg)
    # Chromium's trust store does not hold the plane's CA; the test above verifies the
    # certificate against it.
    options.accept_insecure_certs = True
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def test_the_page_shows_a_cluster_made_after_it_loaded_and_opens_its_tree(plane, ns, browser):
    from selenium.webdriver.common.by import By

    browser.get(login_link(plane))
    wait_for(lambda: browser.find_element(By.ID, "live").text == "live", timeout=20,
             what="the page's event stream")
    # The ClusterClass the cluster names, made (with a first cluster) after the page loaded.
    made = subprocess.run([BINARY, "cluster", "create", unique("first"), "-n", ns, "--kubeconfig",
                           plane.kubeconfig, "--step-startup", "0s", "--no-wait"],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stdout + made.stderr
    name = unique("dash")
    plane.kubectl("apply", "-f", "-", input=CLUSTER.replace("NAME", name).replace("NS", ns))

    search = browser.find_element(By.ID, "search")
    search.send_keys(name)
    key = f"{ns}/{name}"
    row = f'tr[data-cluster="{key}"]'
    # The list is redrawn whenever a cluster changes: an element found may be replaced
    # before it is used, and is then looked up again.
    wait_for(lambda: fresh(browser, lambda: browser.find_element(By.CSS_SELECTOR, row).click() or True),
             timeout=30, what="the cluster's row")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, '#tree li[data-kind="Node"]'),
             timeout=90, what="a Node in the cluster's tree")
    # The tree is redrawn as its objects change: read whole between two redraws.
    wanted = {"Cluster", "KubeadmControlPlane", "MachineDeployment", "MachineSet", "Machine",
              "EtcdMember"}

    def tree_kinds():
        kinds = {li.get_attribute("data-kind") for li in browser.find_elements(By.CSS_SELECTOR, "#tree li")}
        return wanted <= kinds

    wait_for(lambda: fresh(browser, tree_kinds), timeout=30, what=f"{sorted(wanted)} in the tree")
    wait_for(lambda: fresh(browser, lambda: "Provisioned" in browser.find_element(By.CSS_SELECTOR, row).text),
             timeout=60, what="the row to say Provisioned")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#events li"), timeout=30,
             what="the cluster's events")
    # The charts draw once a sample or two is in (one every 5 s while someone looks).
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#chart-phases path.series"),
             timeout=30, what="the clusters-by-phase chart")
    # A rate needs two samples, a line two rates.
    lines = lambda: [p.get_attribute("d") for p in browser.find_elements(By.CSS_SELECTOR, "#chart-requests path.series")]
    wait_for(lambda: fresh(browser, lambda: any("L" in d for d in lines())),
             timeout=60, what="a line in the request-rate chart")

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "dashboard.png"))
    browser.execute_script("document.getElementById('charts').scrollIntoView()")
    browser.save_screenshot(str(ARTIFACTS / "dashboard-charts.png"))
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
