"""examples/cpp_train, the libtorch training loop, built against an installed
Stoker client (cmake --install --component client) and Debian's libtorch, on
a small dataset whose classes differ by colour: two epochs from a real
stoker-server with a falling loss, the same in local mode, and a run
checkpointed after 5 batches and resumed that trains on exactly the batches,
with exactly the losses, of the uninterrupted run.

Usage: train_test.py BUILD_DIR SOURCE_DIR   (skipped, exit 77, without libtorch-dev)"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sdk_common import SOURCE, in_scratch, install_client, run  # noqa: E402

CLASSES, PER_CLASS = 3, 16



def trained(output):
    """{(epoch, batch): (loss text, [sample indices])} and [mean loss per epoch]."""
    batches = {}
    for m in re.finditer(r"^batch (\d+) (\d+): ([\d.]+)((?: \d+)*)$", output, re.M):
        batches[(int(m.group(1)), int(m.group(2)))] = (m.group(3), [int(v) for v in m.group(4).split()])
    means = [float(v) for v in re.findall(r"^epoch \d+ mean loss ([\d.]+)", output, re.M)]
    return batches, means


def write_dataset(root):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(5)
    colours = [(200, 40, 40), (40, 200, 40), (40, 40, 200)]
    for c in range(CLASSES):
        os.makedirs(f"{root}/c{c}")
        for i in range(PER_CLASS):
            img = np.clip(np.array(colours[c]) + rng.integers(-60, 60, size=(64, 64, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(img).save(f"{root}/c{c}/{i:03d}.png")


def body(tmp, procs):
    prefix = install_client(tmp)
    build = os.path.join(tmp, "build")
    run(["cmake", "-S", os.path.join(SOURCE, "examples", "cpp_train"), "-B", build, "-G", "Ninja",
         f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", build])
    train = os.path.join(build, "stoker_train")
    data = os.path.join(tmp, "data")
    write_dataset(f"{data}/colours")
    server, _, _ = procs.server(data)
    common = ["dataset=colours", "batch_size=8", "seed=2", "pipeline=random_resized_crop(48, scale=0.5:1)",
              "device=cpu", "dtype=uint8", "layout=nhwc", "metrics_port=-1", "--classes", str(CLASSES)]
    os.makedirs(f"{tmp}/ck")

    whole, means = trained(run([train, "--epochs", "2", "--checkpoint", f"{tmp}/ck", f"servers={server}",
                                *common]))
    assert len(means) == 2 and means[1] < means[0], f"the loss did not fall: {means}"
    assert len(whole) == 2 * CLASSES * PER_CLASS // 8, sorted(whole)
    print(f"ok: servers: two epochs, mean loss {means[0]:.4f} then {means[1]:.4f}")

    _, local = trained(run([train, "--epochs", "2", "--checkpoint", f"{tmp}/ck", "local_workers=2",
                            f"data_root={data}", *common]))
    assert len(local) == 2 and local[1] < local[0], f"local mode: the loss did not fall: {local}"
    print(f"ok: local mode: two epochs, mean loss {local[0]:.4f} then {local[1]:.4f}")

    first, _ = trained(run([train, "--epochs", "2", "--checkpoint", f"{tmp}/ck", "--stop-after", "5",
                            f"servers={server}", *common]))
    assert len(first) == 5, sorted(first)
    rest, _ = trained(run([train, "--epochs", "2", "--checkpoint", f"{tmp}/ck", "--resume", f"servers={server}",
                           *common]))
    assert not set(first) & set(rest), f"trained twice on {sorted(set(first) & set(rest))}"
    assert {**first, **rest} == whole, "the resumed run's batches or losses differ from the uninterrupted run's"
    print(f"ok: checkpoint after 5 batches and resume: the same {len(whole)} batches with the same losses")
    return 0


def main():
    if not os.path.exists("/usr/lib/x86_64-linux-gnu/cmake/Torch/TorchConfig.cmake"):
        print("skipped: no libtorch-dev (deploy/install-deps.sh installs it)")
        return 77
    return in_scratch("train", body)


if __name__ == "__main__":
    sys.exit(main())
