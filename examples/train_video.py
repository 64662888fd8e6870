#!/usr/bin/env python3
"""A video classifier step: clips decoded and augmented by Stoker, a tiny 3D
convolution network trained on them.

The servers (or local mode) index each video's frames, decode only the
chosen clips from the keyframe before them, crop and flip every frame of a
clip the same way, and send uint8 clips; the loader converts them to float
[N, T, 3, H, W], which the model permutes to [N, 3, T, H, W]. The network
is deliberately small so that the example runs on a CPU in seconds: swap in
an R(2+1)D or a video transformer and keep the loop.

  python3 examples/train_video.py --servers 127.0.0.1:50051 --dataset kinetics-subset --steps 1000
  python3 examples/train_video.py --make-videos /tmp/videos --steps 20   # generated clips, local mode, no server
"""
import argparse
import os
import subprocess
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import stoker


class Tiny3D(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.net = nn.Sequential(nn.Conv3d(3, 16, (3, 3, 3), (1, 2, 2), 1), nn.ReLU(),
                                 nn.Conv3d(16, 32, (3, 3, 3), (2, 2, 2), 1), nn.ReLU(),
                                 nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(32, classes))

    def forward(self, clips):  # [N, T, 3, H, W] -> [N, 3, T, H, W]
        return self.net(clips.permute(0, 2, 1, 3, 4))


def make_videos(root, per_class=6):
    """Two classes of short generated videos (Debian's ffmpeg): moving test
    patterns, and moving noise."""
    sources = {"pattern": "testsrc2=size=96x72:rate=25:duration=2",
               "noise": "cellauto=size=96x72:rate=25:rule=110,format=yuv420p"}
    for cls, source in sources.items():
        os.makedirs(os.path.join(root, "videos", cls), exist_ok=True)
        for i in range(per_class):
            out = os.path.join(root, "videos", cls, f"{i}.mp4")
            if not os.path.exists(out):
                subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", source, "-t", str(1.5 + i * 0.1),
                                "-vf", f"crop=80:60:{i}:{i}", "-c:v", "libx264", "-g", "10", out], check=True,
                               stdin=subprocess.DEVNULL)
    return os.path.join(root), "videos"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", help="data servers host:port,...; none: local mode")
    p.add_argument("--dataset", default="videos", help="class-per-folder tree of video files")
    p.add_argument("--data-root", default=".", help="local mode: the directory holding the dataset")
    p.add_argument("--local-workers", type=int, default=2, help="local mode: decoding threads")
    p.add_argument("--make-videos", metavar="DIR", help="generate a small dataset in DIR and train on it")
    p.add_argument("--frames", type=int, default=8, help="frames per clip")
    p.add_argument("--stride", type=int, default=2, help="every n-th frame")
    p.add_argument("--size", type=int, default=56, help="frame side after the crop, pixels")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--device", default="auto", help="auto, cuda or cpu")
    args = p.parse_args()
    if args.make_videos:
        args.data_root, args.dataset = make_videos(args.make_videos)
    pipeline = (f"video_clip(frames={args.frames}, stride={args.stride}, mode=random), "
                f"random_resized_crop({args.size}, scale=0.5:1), random_horizontal_flip(0.5)")
    loader = stoker.Loader(servers=args.servers, dataset=args.dataset, pipeline=pipeline, batch_size=args.batch_size,
                           seed=0, device=args.device, local_workers=0 if args.servers else args.local_workers,
                           data_root=args.data_root)
    print(f"clips of shape {loader.sample_shape} (uint8 from the data plane), {len(loader)} batches per epoch")
    model = Tiny3D(classes=8)
    device = "cuda" if torch.cuda.is_available() and args.device != "cpu" else "cpu"
    model.to(device)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step, epoch, t0 = 0, 0, time.time()
    while step < args.steps:
        loader.set_epoch(epoch)
        for clips, labels in loader:  # float32 [N, T, 3, H, W], normalised
            loss = F.cross_entropy(model(clips), labels)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            print(f"step {step} epoch {epoch} loss {loss.item():.4f} clips {tuple(clips.shape)}", flush=True)
            step += 1
            if step >= args.steps:
                break
        epoch += 1
    print(f"done: {step} steps in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
