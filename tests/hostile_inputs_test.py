#!/usr/bin/env python3
"""Hostile datasets and sessions against one real stoker-server running under
an 8 GiB address-space limit (prlimit --as), while a second, well-behaved
job streams from it all along (real stoker-bench processes, 127.0.0.1 only).
Each case of the bad-input review (docs/reference/bad-input.md) is asked for
and must fail its sample or its session with a clear error, never the server:

- a WebDataset member of JSON nested 100,000 deep read with a key path;
- a 1-hour near-silent FLAC asked for at 384 kHz x 8 channels, 1 s windows:
  the server's peak RSS stays under 600 MB;
- 31 bytes fields of 100 KB per sample: the batch's fields pass the
  in-flight budget (--max-inflight-bytes) and are refused, naming the flag;
- a tokenizer that names a tar shard; the same name without a tokens field;
- a COCO image with 60,000 boxes (too_large, replaced under skip);
- an MKV with a 200 MB attachment (its clip decodes; the server's peak RSS
  grows by the file it read, under 300 MB, not by three copies of it);
- a 250 KB video of 4096 x 4096 frames (a clip holds one decoded frame at a
  time);
- .cls members that are not numbers (bad samples, never class 0);
- a shard whose member has an empty key (its sidecar is read back);
- a pipeline of 2,001 ops (refused at open);
- a client under a 3 GiB address-space limit asked for 800 MB batches: it
  says it cannot allocate them and stops within a minute.

Usage: hostile_inputs_test.py SOURCE_DIR BUILD_DIR. Exits 1 on any failure;
77 (skipped) where ffmpeg or prlimit is missing.
"""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import Procs  # noqa: E402

ROOT, BUILD = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
BENCH = f"{BUILD}/client/stoker-bench"
SERVER_AS = 8 << 30
failures = []


def check(name, ok, detail=""):
    """Prints the outcome; `detail` (the last lines of a run) only for a failure, or figures in parentheses."""
    shown = detail if (not ok or detail.startswith("(")) else ""
    print(f"{'ok' if ok else 'FAIL'}: {name} {shown}", flush=True)
    if not ok:
        failures.append(name)


def jpeg(seed, size=(48, 40)):
    from PIL import Image
    img = Image.new("RGB", size, ((seed * 40) % 256, (seed * 90) % 256, 120))
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=90)
    return out.getvalue()


def write_tar(path, members):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def ffmpeg(*args):
    subprocess.run(["ffmpeg", "-v", "error", "-y", *args], check=True, stdin=subprocess.DEVNULL)


def make_data(root):
    # Deep JSON among good samples.
    members = []
    for i in range(8):
        members.append((f"s{i}.jpg", jpeg(i)))
        meta = b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}" if i == 0 else b'{"a": [1, 2]}'
        members.append((f"s{i}.json", meta))
    write_tar(f"{root}/deepjson/shard-000000.tar", members)
    # A one-hour near-silent FLAC, and a short one beside it.
    os.makedirs(f"{root}/longaudio/c", exist_ok=True)
    ffmpeg("-f", "lavfi", "-i", "anoisesrc=d=3600:r=16000:a=0.00002:s=3", "-ac", "1", "-c:a", "flac",
           f"{root}/longaudio/c/long.flac")
    # Many bytes fields.
    members = []
    for i in range(64):
        members.append((f"m{i:03d}.jpg", jpeg(i)))
        for f in range(31):
            members.append((f"m{i:03d}.f{f}", bytes([65 + f % 26]) * 100000))
    write_tar(f"{root}/manyfields/shard-000000.tar", members)
    # A COCO image with 60,000 boxes, and one with a single box.
    os.makedirs(f"{root}/coco/img", exist_ok=True)
    for name, seed in (("a.jpg", 1), ("b.jpg", 2)):
        with open(f"{root}/coco/img/{name}", "wb") as f:
            f.write(jpeg(seed, (64, 48)))
    anns = [{"id": i + 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 2, 2], "iscrowd": 0} for i in range(60000)]
    anns.append({"id": 60001, "image_id": 2, "category_id": 1, "bbox": [4, 4, 8, 8], "iscrowd": 0})
    with open(f"{root}/coco/ann.json", "w") as f:
        json.dump({"images": [{"id": 1, "file_name": "a.jpg", "width": 64, "height": 48},
                              {"id": 2, "file_name": "b.jpg", "width": 64, "height": 48}],
                   "categories": [{"id": 1, "name": "x"}], "annotations": anns}, f)
    # An MKV with a 200 MB attachment.
    os.makedirs(f"{root}/attached/c", exist_ok=True)
    blob = f"{root}/blob.bin"
    with open(blob, "wb") as f:
        f.write(b"Z" * (200 << 20))
    ffmpeg("-f", "lavfi", "-i", "testsrc=d=1:s=64x48:r=10", "-c:v", "mpeg4", "-attach", blob,
           "-metadata:s:t", "mimetype=application/octet-stream", f"{root}/attached/c/a.mkv")
    os.remove(blob)
    # 250 KB of video whose 10 frames are 4096 x 4096 (48 MB each as RGB).
    os.makedirs(f"{root}/hugeframes/c", exist_ok=True)
    ffmpeg("-f", "lavfi", "-i", "color=c=black:s=4096x4096:r=25:d=0.4", "-c:v", "mpeg4", "-q:v", "31",
           f"{root}/hugeframes/c/a.mkv")
    # Class files that are not numbers, and one that is.
    members = []
    for i, cls in enumerate([b"abc", b"1e3", b"", b"0x10", b"99999999999999999999", b"1"]):
        members.append((f"k{i}.jpg", jpeg(i)))
        members.append((f"k{i}.cls", cls))
    write_tar(f"{root}/badcls/shard-000000.tar", members)
    # Members with an empty key beside a normal one.
    write_tar(f"{root}/emptykey/shard-000000.tar",
              [(".jpg", jpeg(1)), (".cls", b"0"), ("..", b"x"), ("...jpg", b"y"), ("a.jpg", jpeg(2)), ("a.cls", b"1")])


def bench(address, *args, timeout=120, prefix=()):
    r = subprocess.run([*prefix, BENCH, "--metrics-port=-1", f"--servers={address}", "--epochs=1", "--device=cpu",
                        "--connect-timeout-seconds=5", "--unavailable-timeout-seconds=20", *args],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return r.returncode, r.stdout


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def reset_peak(pid):
    """Resets the process's VmHWM (Linux 4.0+); False where it cannot."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def bench_peak(address, server_pid, *args, timeout=120):
    """A bench run and the server's peak RSS around it: (exit code, output, KB resident before, peak KB), the last
    two None where the peak cannot be reset."""
    can_reset = reset_peak(server_pid)
    rss = status_kb(server_pid, "VmRSS")
    rc, out = bench(address, *args, timeout=timeout)
    peak = status_kb(server_pid, "VmHWM")
    return (rc, out, rss, peak) if can_reset else (rc, out, None, None)


def tail(text, n=3):
    return " | ".join(text.strip().splitlines()[-n:])[-600:]


def cases(address, server_pid, log):
    rc, out = bench(address, "--dataset=deepjson", "--batch-size=8", "--pipeline=center_crop(32)",
                    "--fields=image=jpg, meta=json:json@a")
    check("deep JSON: the batch is served, the sample replaced", rc == 0, tail(out))
    server_log = open(log).read()
    check("deep JSON: the server names the member and the depth",
          "shard-000000.tar:s0.json (field 'meta'): JSON nested deeper than 256" in server_log)

    rc, out, rss, peak = bench_peak(address, server_pid, "--dataset=longaudio", "--batch-size=1", "--max-batches=1",
                                    "--pipeline=audio(rate=384000, channels=8, seconds=1)", timeout=180)
    check("1-hour FLAC at 384 kHz x 8: its window is served", rc == 0, tail(out))
    if peak is not None:
        check("1-hour FLAC at 384 kHz x 8: the server's peak RSS stays under 600 MB", peak < 600 * 1024,
              f"(peak {peak // 1024} MB, {rss // 1024} MB before)")
    else:
        print("skipped: the server's peak RSS cannot be reset here (/proc/PID/clear_refs)")
    rc, out = bench(address, "--dataset=longaudio", "--batch-size=1", "--max-batches=1",
                    "--pipeline=audio(rate=16000, channels=1, seconds=1)")
    check("1-hour FLAC at 16 kHz mono: served", rc == 0, tail(out))

    fields = ", ".join(["image=jpg"] + [f"b{f}=bytes:f{f}" for f in range(31)])
    rc, out = bench(address, "--dataset=manyfields", "--batch-size=64", "--max-batches=1",
                    "--pipeline=center_crop(32)", f"--fields={fields}", "--max-field-bytes=200000", timeout=180)
    check("31 bytes fields of 100 KB at batch 64: refused by the in-flight budget, naming the flag",
          rc != 0 and "--max-inflight-bytes" in out, tail(out))

    rc, out = bench(address, "--dataset=deepjson", "--batch-size=8", "--pipeline=center_crop(32)",
                    "--fields=image=jpg, ids=tokens:json", "--tokenizer=deepjson/shard-000000.tar")
    check("a tokenizer naming a shard: refused by its shape before SentencePiece reads it",
          rc != 0 and "is not a SentencePiece model: byte 0" in out, tail(out))
    rc, out = bench(address, "--dataset=deepjson", "--batch-size=8", "--pipeline=center_crop(32)",
                    "--fields=image=jpg, ids=tokens:json", "--tokenizer=manyfields/shard-000000.tar")
    check("a tokenizer naming a 200 MB shard: refused by its size before it is read",
          rc != 0 and "a SentencePiece model file may have at most 67108864" in out, tail(out))
    rc, out = bench(address, "--dataset=deepjson", "--batch-size=8", "--pipeline=center_crop(32)", "--max-batches=1",
                    "--fields=image=jpg", "--tokenizer=manyfields/shard-000000.tar")
    check("the same tokenizer without a tokens field: never read, the session is served", rc == 0, tail(out))

    rc, out = bench(address, "--dataset=coco/img", "--annotations=coco/ann.json", "--batch-size=2",
                    "--pipeline=resize_pad(32)", "--fields=image, boxes, labels")
    check("60,000 boxes: the image is too_large and replaced, the batch served", rc == 0, tail(out))
    check("60,000 boxes: the server names the sample", "its fields hold 1200000 bytes" in open(log).read())

    rc, out, rss, peak = bench_peak(address, server_pid, "--dataset=attached", "--batch-size=1",
                                    "--pipeline=video_clip(frames=2), resize(32), center_crop(32)")
    check("an MKV with a 200 MB attachment: its clip is served", rc == 0, tail(out))
    if peak is not None:
        # The file itself (200 MB) is read into memory; its attachment is not read again.
        check("an MKV with a 200 MB attachment: the peak RSS grows by under 300 MB", peak - rss < 300 * 1024,
              f"(+{(peak - rss) // 1024} MB)")

    rc, out, rss, peak = bench_peak(address, server_pid, "--dataset=hugeframes", "--batch-size=1",
                                    "--pipeline=video_clip(frames=8), resize(32), center_crop(32)")
    check("a small video of 4096 x 4096 frames: its clip is served", rc == 0, tail(out))
    if peak is not None:
        # Eight decoded frames together were 400 MB; one at a time, one frame and the decoder's.
        check("a small video of 4096 x 4096 frames: the peak RSS grows by under 250 MB", peak - rss < 250 * 1024,
              f"(+{(peak - rss) // 1024} MB)")

    rc, out = bench(address, "--dataset=badcls", "--batch-size=6", "--pipeline=center_crop(32)")
    check("class files that are not numbers: bad samples replaced", rc == 0, tail(out))
    rc, out = bench(address, "--dataset=badcls", "--batch-size=6", "--pipeline=center_crop(32)",
                    "--bad-sample-policy=fail")
    check("class files that are not numbers: under fail, the epoch ends naming one",
          rc != 0 and "not an integer class label" in out, tail(out))

    for _ in range(2):
        rc, out = bench(address, "--dataset=emptykey", "--batch-size=2", "--pipeline=center_crop(32)",
                        "--max-batches=1")
    check("an empty key: served", rc == 0, tail(out))
    # Each open of the dataset reads the sidecar back (no warning, no rewrite).
    check("an empty key: its sidecar is read back", "ignoring sidecar" not in open(log).read())

    ops = ", ".join(["random_horizontal_flip(0.5)"] * 2000)  # an argument holds at most 128 KB
    rc, out = bench(address, "--dataset=deepjson", "--batch-size=8", f"--pipeline=center_crop(32), {ops}")
    check("a pipeline of 2,001 ops: refused naming the limit", rc != 0 and "at most 1024" in out, tail(out))


def main():
    for tool in ("ffmpeg", "prlimit"):
        if shutil.which(tool) is None:
            print(f"skipped: {tool} is not installed")
            return 77
    tmp = tempfile.mkdtemp(prefix="stoker-hostile-")
    procs = Procs(tmp, BUILD)
    try:
        data = os.path.join(tmp, "data")
        make_data(data)
        # The server under the address-space limit.
        p, log = procs.start(["prlimit", f"--as={SERVER_AS}", f"{BUILD}/server/stoker-server", "--host=127.0.0.1",
                              "--port=0", "--metrics-port=0", f"--data-root={data}", "--workers=2",
                              "--max-inflight-bytes=134217728"], "server")
        from logwait import wait_for
        g = wait_for(log, r"listening on [\d.]+:(\d+)", 30)
        if not g:
            print(open(log).read())
            return 1
        address = f"127.0.0.1:{g.group(1)}"
        # The well-behaved job: synthetic images, epochs without end, all along.
        batches = os.path.join(tmp, "good-batches.jsonl")
        good, good_log = procs.bench(f"--servers={address}", "--dataset=synthetic:64x64:512:10", "--batch-size=32",
                                     "--pipeline=center_crop(32)", "--epochs=1000000", "--device=cpu",
                                     "--unavailable-timeout-seconds=30", f"--log-batches={batches}", name="good-job")
        delivered = lambda: sum(1 for _ in open(batches)) if os.path.exists(batches) else 0  # noqa: E731
        time.sleep(2)
        before = delivered()
        cases(address, p.pid, log)
        after = delivered()
        check("the server is alive after every case", p.poll() is None)
        check("the well-behaved job kept getting batches through every case", good.poll() is None and after > before,
              f"({after - before} batches during the cases) {tail(open(good_log).read())}")
        procs.stop()

        # A client that cannot take its batches says so and stops.
        root2 = os.path.join(tmp, "empty")
        os.makedirs(root2)
        procs2 = Procs(tmp, BUILD)
        address2, _, _ = procs2.server(root2)
        start = time.time()
        rc, out = bench(address2, "--dataset=synthetic:1024x1024:2048:10", "--batch-size=256", "--max-batches=8",
                        "--pipeline=center_crop(1024)", "--dtype=uint8", "--out-dtype=uint8", "--prefetch=4",
                        prefix=("prlimit", "--as=2147483648"), timeout=120)  # not even one batch and its tensor
        took = time.time() - start
        procs2.stop()
        # 2 GiB: one 800 MB batch and its 800 MB tensor beside the client's own 0.6 GB do not fit, however the
        # batches' arrivals overlap (under 3 GiB a one-worker server's batches could come one at a time and fit).
        check("a client under a 2 GiB limit asked for 800 MB batches says it cannot allocate them and stops",
              rc != 0 and "this process cannot allocate" in out and took < 60, f"({took:.0f} s) {tail(out)}")
    finally:
        procs.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failed: {', '.join(failures)}")
        return 1
    print("hostile inputs: every case passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
