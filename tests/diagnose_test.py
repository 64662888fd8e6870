#!/usr/bin/python3
"""stoker-diagnose names an induced bottleneck: an expensive op on one worker
(augment), reads throttled by the test-only server flag (storage), and a
network namespace whose loopback tc limits to 400 mbit (network; skipped
loudly where namespaces cannot be made). Real servers, real client, traffic
on 127.0.0.1 only.

Usage: diagnose_test.py REPO_ROOT BUILD_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bottleneck_test as bt  # noqa: E402  (shares the namespace and process helpers)

DIAGNOSE = f"{bt.BUILD}/client/stoker-diagnose"


def run(name, expected, server_args, diag_args, data, netns=False):
    ns = bt.Netns() if netns else None
    prefix = ns.prefix if ns else []
    work = tempfile.mkdtemp(prefix=f"stoker-diag-{name}-")
    server = None
    try:
        out = f"{work}/server.out"
        server = subprocess.Popen(prefix + [bt.SERVER, "--host=127.0.0.1", "--port=0", "--metrics-port=-1",
                                            f"--data-root={data}"] + server_args,
                                  stdout=open(out, "w"), stderr=subprocess.DEVNULL)
        m = bt.wait_for(out, r"listening on [\d.]+:(\d+)", 20)
        if not m:
            bt.record(f"{name}: server starts", False)
            return
        r = subprocess.run(prefix + [DIAGNOSE, f"--servers=127.0.0.1:{m.group(1)}", "--dataset=ds", "--batch-size=32",
                                     "--device=cpu", f"--json={work}/ladder.json", f"--html={work}/ladder.html"]
                           + diag_args, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            bt.record(f"{name}: stoker-diagnose runs", False, r.stderr[-2000:])
            return
        ladder = json.load(open(f"{work}/ladder.json"))
        rates = ", ".join(f"{s['step']} {s['images_per_second']:.0f}/s" for s in ladder["steps"])
        bt.record(f"{name}: stoker-diagnose names {expected}", ladder["bottleneck"] == expected,
                  f"(got {ladder['bottleneck']}; {rates})")
        html = open(f"{work}/ladder.html").read()
        bt.record(f"{name}: HTML report has the chart", "<svg" in html and ladder["bottleneck"] in html)
    finally:
        if server:
            server.terminate()
            server.wait(timeout=15)
        if ns:
            ns.delete()
        shutil.rmtree(work, ignore_errors=True)


def main():
    data = tempfile.mkdtemp(prefix="stoker-diag-data-")
    try:
        subprocess.run([bt.MAKE_IMAGES, f"--out={data}/ds", "--classes=8", "--per-class=32", "--min-side=200",
                        "--max-side=400"], check=True, capture_output=True)
        run("augment", "augment", ["--workers=1"],
            ["--batches=12", "--pipeline=random_resized_crop(224), color_jitter(0.4, 0.4, 0.4, 0.1)"], data)
        run("storage", "storage", ["--workers=2", "--test-read-bytes-per-second=1500000"],
            ["--batches=6", "--pipeline=center_crop(224)"], data)
        why = bt.netns_possible()
        if why:
            print(f"SKIPPED (loudly): network ladder: cannot create a network namespace here: {why}", flush=True)
            bt.results.append(("network", "SKIP", why))
        else:
            run("network", "network", ["--workers=2"], ["--batches=12", "--pipeline=center_crop(224)"], data,
                netns=True)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    passed = sum(1 for r in bt.results if r[1] == "ok")
    failed = sum(1 for r in bt.results if r[1] == "FAIL")
    skipped = sum(1 for r in bt.results if r[1] == "SKIP")
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
