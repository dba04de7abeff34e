"""govmomi, the Go library under govc and CAPV (Debian's package), against `infrasim vcsim`,
driven by our small Go client in tests/govmomi."""

import os
import pathlib
import subprocess

import pytest

from test_pyvmomi import PASSWORD, Vcsim

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOPATH_SRC = ROOT / "tests" / "govmomi"


@pytest.fixture(scope="module")
def govmomi_client(tmp_path_factory):
    out = tmp_path_factory.mktemp("go") / "govmomi-e2e"
    env = dict(os.environ, GO111MODULE="off", GOFLAGS="", GOPATH=f"{GOPATH_SRC}:/usr/share/gocode",
               GOCACHE=str(tmp_path_factory.mktemp("gocache")))
    subprocess.run(["go", "build", "-o", str(out), "govmomi-e2e"], check=True, env=env, timeout=600,
                   cwd=GOPATH_SRC)
    return out


def test_govmomi_capv_flow_and_govc_style_reads(govmomi_client, tmp_path):
    v = Vcsim(tmp_path)
    try:
        url = f"https://administrator%40vsphere.local:{PASSWORD}@127.0.0.1:{v.port}/sdk"
        proc = subprocess.run([str(govmomi_client), "-url", url], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        steps = [line for line in proc.stdout.splitlines() if line.startswith("ok ")]
        assert steps == [
            "ok about", "ok ls vm", "ok ls host", "ok retrieve summaries", "ok clone result",
            "ok clone config", "ok guest ip", "ok invalid power state", "ok events", "ok snapshots",
            "ok destroyed",
        ]
        assert proc.stdout.strip().endswith("PASS")
    finally:
        v.stop()
