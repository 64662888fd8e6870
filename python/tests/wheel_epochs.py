"""Run by wheel_test.sh with the interpreter a wheel was installed for (in a
venv on this host, or in a Debian trixie root): the installed package, not
the build tree, reads epochs through stoker.Loader and checks them.

  wheel_epochs.py --servers ADDR --data-root DIR [--grpc first|after|none] [--expect-site PREFIX]
                  [--media]

With --media, the data root (and the server's) also holds `clips` (audio, 2
classes of 2 files) and `videos` (2 classes of 2 MP4s), made by
wheel_test.sh with ffmpeg: each is read as one epoch through the packaged
media module and the host's FFmpeg (the module it loaded is printed).

Prints one line per check ("ok: ..."), exits non-zero on the first failure.
Each epoch must hold the 64 samples of the `ds` set made by stoker-make-images
(4 classes of 16) exactly once.
"""

import argparse
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--servers", help="host:port of a stoker-server; none: local mode only")
    p.add_argument("--data-root", help="the image folder, for local mode")
    p.add_argument("--grpc", choices=("first", "after", "none"), default="none",
                   help="import PyPI's grpcio before or after stoker, and use it")
    p.add_argument("--expect-site", help="stoker must be imported from under this folder")
    p.add_argument("--frameworks", default="numpy,torch", help="numpy first: it must not import torch")
    p.add_argument("--media", action="store_true", help="also the clips (audio) and videos datasets")
    args = p.parse_args()

    if args.grpc == "first":
        import grpc

        assert "site-packages" in grpc.__file__, grpc.__file__
    import stoker

    if args.expect_site:
        assert stoker.__file__.startswith(args.expect_site), f"imported {stoker.__file__}"
    print(f"ok: import stoker {stoker.__version__} from {stoker.__file__} (Python {sys.version.split()[0]})")
    if args.grpc == "after":
        import grpc
    if args.grpc != "none":
        assert "site-packages" in grpc.__file__, grpc.__file__
    if args.servers and args.grpc != "none":
        # gRPC from PyPI's grpcio and Stoker's own in one process, both used.
        channel = grpc.insecure_channel(args.servers)
        grpc.channel_ready_future(channel).result(timeout=20)
        channel.close()
        print(f"ok: grpcio {grpc.__version__} connected to {args.servers} in the same process")

    sources = []
    if args.data_root:
        sources.append(("local mode", dict(servers=None, local_workers=2, data_root=args.data_root)))
    if args.servers:
        sources.append((f"server {args.servers}", dict(servers=args.servers)))
    for framework in args.frameworks.split(","):
        for name, kw in sources:
            loader = stoker.Loader(dataset="ds", pipeline="random_resized_crop(32), random_horizontal_flip(0.5)",
                                   batch_size=8, seed=7, device="cpu", framework=framework, dtype="uint8",
                                   layout="nchw", **kw)
            seen, labels = [], set()
            for images, y in loader:
                if framework == "torch":
                    import torch

                    assert isinstance(images, torch.Tensor) and images.dtype == torch.uint8, type(images)
                    labels |= set(y.tolist())
                else:
                    import numpy

                    assert isinstance(images, numpy.ndarray) and images.dtype == numpy.uint8, type(images)
                    labels |= set(y.tolist())
                assert tuple(images.shape[1:]) == (3, 32, 32), images.shape
                seen += loader.last_batch["sample_indices"]
            loader.close()
            assert sorted(seen) == list(range(64)), f"{name}: samples {sorted(seen)[:10]}... ({len(seen)})"
            assert labels == {0, 1, 2, 3}, labels
            if framework == "numpy":
                assert "torch" not in sys.modules, "framework='numpy' imported torch"
            print(f"ok: {framework}, {name}: 64 samples exactly once")
    if args.media:
        media_epochs(stoker, sources, args.expect_site)
    with open("/proc/self/maps") as f:
        protobufs = sorted({line.split()[-1].rsplit("/", 1)[-1] for line in f if "libprotobuf" in line})
    print(f"ok: protobuf copies in this process: {', '.join(protobufs) or 'none'}")


def media_epochs(stoker, sources, site):
    import numpy

    for dataset, pipeline, shape in (("clips", "audio(rate=16000, seconds=0.5, crop=center)", (1, 8000)),
                                     ("videos", "video_clip(frames=2, stride=2), center_crop(32)", (2, 32, 32, 3))):
        for name, kw in sources:
            loader = stoker.Loader(dataset=dataset, pipeline=pipeline, batch_size=2, seed=3, device="cpu",
                                   framework="numpy", dtype="uint8" if dataset == "videos" else "float32",
                                   layout="nhwc", **kw)
            seen = []
            for batch, _ in loader:
                assert isinstance(batch, numpy.ndarray) and tuple(batch.shape[1:]) == shape, batch.shape
                assert float(numpy.abs(batch.astype(numpy.float32)).sum()) > 0, f"{dataset}: an all-zero batch"
                seen += loader.last_batch["sample_indices"]
            loader.close()
            assert sorted(seen) == [0, 1, 2, 3], f"{dataset}, {name}: samples {seen}"
            print(f"ok: {dataset} ({pipeline}), {name}: 4 samples exactly once")
    with open("/proc/self/maps") as f:
        modules = sorted({line.split()[-1] for line in f if "libstoker_media" in line or "libavformat" in line})
    if site:
        outside = [m for m in modules if "libstoker_media" in m and not m.startswith(site)]
        assert not outside, f"a media module from outside the installed package: {outside}"
    print(f"ok: media decoding through {', '.join(m.rsplit('/', 1)[-1] for m in modules) or 'a server'}")


if __name__ == "__main__":
    main()
