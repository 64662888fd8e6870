"""A training job's view of Stoker's C++ client, installed: `cmake --install
--component client` into a fresh prefix, then an out-of-tree project (this
folder) built against that prefix only, with find_package(Stoker COMPONENTS
client), with pkg-config and a plain Makefile, and with the old standard
library ABI (-D_GLIBCXX_USE_CXX11_ABI=0). Each build runs against real
stoker-server processes on 127.0.0.1: an epoch exactly once; the CMake build
also fields, a resume from a saved state equal to the uninterrupted epoch,
and a server SIGKILLed mid-epoch survived.

Usage: sdk_test.py BUILD_DIR SOURCE_DIR"""
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sdk_common import BUILD, SOURCE, in_scratch, install_client, run  # noqa: E402

EXAMPLE = os.path.join(SOURCE, "examples", "cpp_epoch", "epoch.cc")
SAMPLES = 3 * 10



def batches(output):
    """{(epoch, batch): [sample indices]} from the example's output."""
    out = {}
    for m in re.finditer(r"^batch (\d+) (\d+) (\d+):((?: \d+)*)$", output, re.M):
        key = (int(m.group(1)), int(m.group(2)))
        assert key not in out, f"batch {key} twice"
        out[key] = [int(v) for v in m.group(4).split()]
    return out


def exactly_once(found, epoch, what):
    seen = sorted(i for (e, _), ids in found.items() if e == epoch for i in ids)
    assert seen == list(range(SAMPLES)), f"{what}: epoch {epoch} gave {seen}"


def body(tmp, procs):
    prefix = install_client(tmp)
    # The prefix holds the client alone: no other Stoker header.
    headers = sorted(os.listdir(os.path.join(prefix, "include", "stoker")))
    assert headers == ["c_api.h", "client.h", "client_options.inc"], headers

    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    programs = {}
    cmake_build = os.path.join(tmp, "cmake-build")
    run(["cmake", "-S", os.path.join(SOURCE, "tests", "cpp_sdk"), "-B", cmake_build, "-G", "Ninja",
         f"-DCMAKE_PREFIX_PATH={prefix}", f"-DSTOKER_EXAMPLE={EXAMPLE}", "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", cmake_build])
    programs["find_package"] = os.path.join(cmake_build, "sdk_epoch")
    for name, abi in (("pkg-config", "1"), ("pkg-config, old ABI", "0")):
        out = os.path.join(tmp, "make-abi" + abi)
        os.makedirs(out)
        run(["make", "-s", "-f", os.path.join(SOURCE, "tests", "cpp_sdk", "Makefile"), f"SRC={EXAMPLE}",
             f"OUT={out}", f"ABI={abi}"], env=env)
        programs[name] = os.path.join(out, "sdk_epoch")
    flags = run(["pkg-config", "--cflags", "stoker-client"], env=env)
    assert SOURCE not in flags, flags

    data = os.path.join(tmp, "data")
    run([os.path.join(BUILD, "tests", "stoker-make-images"), f"--out={data}/ds", "--classes=3",
         "--per_class=10", "--min_side=48", "--max_side=96"])
    fast, _, _ = procs.server(data)
    slow, _, _ = procs.server(data, "--test-sample-delay-ms=40")
    servers = f"servers={fast},{slow}"
    common = ["dataset=ds", "batch_size=4", "seed=3", "pipeline=random_resized_crop(24)", "device=cpu",
              "dtype=uint8", "metrics_port=-1"]

    for name, program in programs.items():  # an epoch exactly once, whatever the build
        found = batches(run([program, "--epochs", "2", servers, *common]))
        exactly_once(found, 0, name)
        exactly_once(found, 1, name)
        print(f"ok: {name}: two epochs exactly once from two servers")

    program = programs["find_package"]
    whole = batches(run([program, "--first-epoch", "4", servers, *common]))
    state = os.path.join(tmp, "state.bin")
    first = batches(run([program, "--first-epoch", "4", "--stop-after", "3", "--save-state", state, servers,
                         *common]))
    rest = batches(run([program, "--first-epoch", "4", "--restore", state, servers, *common]))
    assert not set(first) & set(rest), f"batches twice across the resume: {set(first) & set(rest)}"
    assert {**first, **rest} == whole, "the resumed epoch differs from the uninterrupted one"
    print(f"ok: resume after {len(first)} batches gives the uninterrupted epoch ({len(whole)} batches)")

    # A server SIGKILLed mid-epoch: its batches go to the other.
    victim, _, _ = procs.server(data, "--test-sample-delay-ms=40")
    p = subprocess.Popen([program, f"servers={fast},{victim}", *common], stdout=subprocess.PIPE, text=True)
    lines = [p.stdout.readline()]
    killed = procs.procs[-1]
    killed.send_signal(signal.SIGKILL)
    lines += p.stdout.readlines()
    assert p.wait(timeout=120) == 0, "".join(lines)
    exactly_once(batches("".join(lines)), 0, "SIGKILL")
    print("ok: an epoch exactly once with a server SIGKILLed after the first batch")

    # Fields through the installed API: a caption per sample.
    shards = os.path.join(data, "pairs")
    os.makedirs(shards)
    import tarfile, io  # noqa: E401
    with tarfile.open(os.path.join(shards, "train-000000.tar"), "w") as tar:
        jpeg = open(sorted(os.path.join(dp, f) for dp, _, fs in os.walk(f"{data}/ds") for f in fs)[0], "rb").read()
        for i in range(SAMPLES):
            for ext, body in (("jpg", jpeg), ("txt", f"caption {i}".encode())):
                info = tarfile.TarInfo(f"s{i:03d}.{ext}")
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
    field_server, _, _ = procs.server(data)
    out = run([program, f"servers={field_server}", "dataset=pairs", "fields=image=jpg, caption=txt",
               "--print-field", "caption", *[c for c in common if not c.startswith("dataset=")]])
    captions = re.findall(r"^field caption (\d+): (.*)$", out, re.M)
    assert sorted(int(i) for i, _ in captions) == list(range(SAMPLES)), out[:2000]
    assert all(text == f"caption {i}" for i, text in captions), captions[:5]
    print("ok: fields: each sample's caption")
    return 0


def main():
    return in_scratch("sdk", body)


if __name__ == "__main__":
    sys.exit(main())
