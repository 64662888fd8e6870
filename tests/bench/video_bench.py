#!/usr/bin/python3
"""Video clips per core (issue 34): Stoker against a torch DataLoader that
decodes the same clips with PyAV, in one run.

Videos: BENCH_VIDEOS (default 24) H.264 files of 8 s at 25 fps, 400x300,
a keyframe every 50 frames (x264's default 250 is longer than the videos),
made with Debian's ffmpeg from the standard photo set
(../shared/bench/photoset.sh): each a photograph panned across, so that the
frames differ as a camera's do. Under .bench/video-N (made once).

Both sides take one random clip of 16 frames, every 2nd frame, per video,
decode it from the keyframe before it, and cut 112x112 from each frame after
a resize to 128 (Stoker: resize(128), center_crop(112); the DataLoader:
torchvision's resize and center_crop on the uint8 frames).

- Stoker: local mode with one worker thread (local_workers=1).
- DataLoader: num_workers=1, a persistent worker that keeps each video's
  frame timestamps after its first demux (as Stoker keeps its index): PyAV
  seeks to the keyframe before the clip's first timestamp (container.seek)
  and decodes until its last frame, frame.to_ndarray(format="rgb24").
- DataLoader with decord (PyPI decord, when it imports: `make bench`
  installs it in the venv): the same, one decoder thread
  (VideoReader(num_threads=1), kept per video as its index), get_batch of
  the clip's frame indices.

Each side runs one warm-up epoch and then WINDOWS_ROUNDS (3) epochs,
alternated; medians, and the ratios (goal: 2x).

Then decoder threads for lone clips: a stoker-server with --workers=2 and a
client that keeps one clip of 64 frames in flight (batch 1, prefetch 1), so
that one worker decodes and the other core would idle. Clips per second
with --video-decoder-threads=1 (one thread per clip) against the default 0
(the workers shared among the clips being decoded: two threads here), in
alternated rounds; medians and the ratio. On the 400x300 videos above, and
on 4 videos of 1280x720 (6 s, made the same way, .bench/video-720p).

Usage: tests/bench/video_bench.py [BUILD_DIR]
"""
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
VIDEOS = int(os.environ.get("BENCH_VIDEOS", "24"))
ROUNDS = int(os.environ.get("WINDOWS_ROUNDS", "3"))
DATA = os.path.join(ROOT, ".bench", f"video-{VIDEOS}")
HD = os.path.join(ROOT, ".bench", "video-720p")
PHOTOS = os.path.join(ROOT, ".bench", "photos-1000")  # as the other benchmarks
sys.path.insert(0, os.path.join(BUILD, "python"))
os.environ.setdefault("STOKER_LOG_LEVEL", "1")

FRAMES, STRIDE, SIZE, BATCH = 16, 2, 112, 4


def make_videos(data=DATA, videos=VIDEOS, size=(400, 300), seconds=8):
    if os.path.exists(os.path.join(data, ".done")):
        return
    if not os.path.isdir(PHOTOS):
        subprocess.run([os.path.join(ROOT, "..", "shared", "bench", "photoset.sh"), PHOTOS, "1000"], check=True)
    photos = sorted(os.path.join(d, f) for d, _, fs in os.walk(PHOTOS) for f in fs if f.lower().endswith(".jpg"))
    for i in range(videos):
        cls = ("a", "b")[i % 2]
        os.makedirs(os.path.join(data, cls), exist_ok=True)
        # A view 1.4x the frame of the photo, panned: crops moving over the video.
        w, h = size
        vf = (f"scale={w * 7 // 5}:{h * 7 // 5},crop={w}:{h}:x='{w // 5}+{w // 6}*sin(t*0.9)':"
              f"y='{h // 5}+{h // 6}*cos(t*0.7)',format=yuv420p")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-loop", "1", "-framerate", "25", "-i", photos[i % len(photos)],
                        "-t", str(seconds), "-vf", vf, "-c:v", "libx264", "-g", "50", "-preset", "veryfast",
                        os.path.join(data, cls, f"{i:04d}.mp4")], check=True, stdin=subprocess.DEVNULL)
    open(os.path.join(data, ".done"), "w").close()


class PyAvClips:
    def __init__(self):
        self.files = sorted(os.path.join(d, f) for d, _, fs in os.walk(DATA) for f in fs if f.endswith(".mp4"))
        self.index = {}  # per worker: each video's frame timestamps, kept across epochs as Stoker's index cache

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        import av
        import numpy as np
        import torch
        import torchvision.transforms.functional as TF
        with av.open(self.files[i]) as container:
            stream = container.streams.video[0]
            # Every frame's timestamp (a demux the first time, as Stoker's index), then the clip's.
            if i not in self.index:
                self.index[i] = sorted(p.pts for p in container.demux(stream) if p.pts is not None)
                container.seek(0)
            pts = self.index[i]
            start = np.random.randint(0, max(1, len(pts) - (FRAMES - 1) * STRIDE))
            wanted = [pts[min(len(pts) - 1, start + t * STRIDE)] for t in range(FRAMES)]
            container.seek(wanted[0], stream=stream, backward=True)
            got = {}
            for frame in container.decode(stream):
                if frame.pts in wanted:
                    got[frame.pts] = frame.to_ndarray(format="rgb24")
                if frame.pts >= wanted[-1]:
                    break
        clip = torch.from_numpy(np.stack([got[p] for p in wanted])).permute(0, 3, 1, 2)  # T, 3, H, W
        clip = TF.center_crop(TF.resize(clip, 128, antialias=True), SIZE)
        return clip.permute(0, 2, 3, 1).contiguous(), int("/b/" in self.files[i])


class DecordClips(PyAvClips):
    def __getitem__(self, i):
        import decord
        import numpy as np
        import torch
        import torchvision.transforms.functional as TF
        if i not in self.index:  # the reader keeps the video's index (its keyframes) once built
            self.index[i] = decord.VideoReader(self.files[i], ctx=decord.cpu(0), num_threads=1)
        reader = self.index[i]
        n = len(reader)
        start = np.random.randint(0, max(1, n - (FRAMES - 1) * STRIDE))
        frames = reader.get_batch([min(n - 1, start + t * STRIDE) for t in range(FRAMES)]).asnumpy()
        clip = torch.from_numpy(frames).permute(0, 3, 1, 2)  # T, 3, H, W
        clip = TF.center_crop(TF.resize(clip, 128, antialias=True), SIZE)
        return clip.permute(0, 2, 3, 1).contiguous(), int("/b/" in self.files[i])


def dataloader(dataset=None):
    import torch
    torch.set_num_threads(1)
    return torch.utils.data.DataLoader(dataset or PyAvClips(), batch_size=BATCH, shuffle=True, num_workers=1,
                                       persistent_workers=True)


def decord_loader():
    """A DataLoader over decord, or None where decord does not import."""
    try:
        import decord  # noqa: F401
    except ImportError as e:
        print(f"decord: not measured ({e}; `make bench` installs it in the venv)")
        return None
    return dataloader(DecordClips())


def stoker_loader():
    import stoker
    return stoker.Loader(dataset=os.path.basename(DATA), data_root=os.path.dirname(DATA), local_workers=1,
                         pipeline=f"video_clip(frames={FRAMES}, stride={STRIDE}, mode=random), resize(128), "
                                  f"center_crop({SIZE})",
                         batch_size=BATCH, device="cpu", dtype="uint8", layout="nhwc", seed=1)


def clips_per_second(loader, epoch=None):
    if epoch is not None:
        loader.set_epoch(epoch)
    t0 = time.perf_counter()
    n = 0
    for x, _ in loader:
        assert tuple(x.shape[1:]) == (FRAMES, SIZE, SIZE, 3), x.shape
        n += x.shape[0]
    return n / (time.perf_counter() - t0)


def lone_clips(data, threads, rounds):
    """Clips per second from a 2-worker server decoding one 64-frame clip
    of the videos in `data` at a time, for each --video-decoder-threads
    value in `threads`."""
    import stoker
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from logwait import wait_for
    frames = 64
    servers, loaders = {}, {}
    try:
        for t in threads:
            log = os.path.join(ROOT, ".bench", f"video-threads-{t}.log")
            p = subprocess.Popen([os.path.join(BUILD, "server", "stoker-server"), "--host=127.0.0.1", "--port=0",
                                  "--metrics-port=-1", "--workers=2", f"--video-decoder-threads={t}",
                                  f"--data-root={os.path.dirname(data)}"], stdout=open(log, "w"),
                                 stderr=subprocess.STDOUT)
            servers[t] = p
            m = wait_for(log, r"listening on [\d.]+:(\d+)", 20)
            if not m:
                raise SystemExit(f"server did not start: {open(log).read()[-1000:]}")
            loaders[t] = stoker.Loader(servers=f"127.0.0.1:{m.group(1)}", dataset=os.path.basename(data),
                                       pipeline=f"video_clip(frames={frames}, stride=1, mode=random), resize(128), "
                                                f"center_crop({SIZE})",
                                       batch_size=1, window=1, streams_per_server=1, prefetch=1, device="cpu",
                                       dtype="uint8", layout="nhwc", seed=1)
        rates = {t: [] for t in threads}
        for r in range(rounds + 1):
            for t in threads:
                loaders[t].set_epoch(r)
                t0 = time.perf_counter()
                n = sum(x.shape[0] for x, _ in loaders[t])
                if r > 0:  # the first is a warm-up
                    rates[t].append(n / (time.perf_counter() - t0))
        return {t: statistics.median(v) for t, v in rates.items()}
    finally:
        for l in loaders.values():
            l.close()
        for p in servers.values():
            p.terminate()
            p.wait()


def main():
    make_videos()
    print(f"{VIDEOS} H.264 videos of 8 s, 400x300 at 25 fps (keyframe every 50) in {DATA}; one random clip of "
          f"{FRAMES} frames (stride {STRIDE}) per video, resize(128) + center_crop({SIZE}), uint8; one core each side")
    ours_loader, their_loader, decord_dl = stoker_loader(), dataloader(), decord_loader()
    clips_per_second(ours_loader, 0)
    clips_per_second(their_loader)
    if decord_dl is not None:
        clips_per_second(decord_dl)
    ours, theirs, decords = [], [], []
    for r in range(ROUNDS):
        ours.append(clips_per_second(ours_loader, r + 1))
        theirs.append(clips_per_second(their_loader))
        if decord_dl is not None:
            decords.append(clips_per_second(decord_dl))
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"{'':<12}{'Stoker (clips/s)':>18}{'DataLoader+PyAV (clips/s)':>28}{'ratio':>8}")
    print(f"{'clips':<12}{a:>18.2f}{b:>28.2f}{a / b:>7.2f}x")
    if decords:
        c = statistics.median(decords)
        print(f"{'':<12}{'Stoker (clips/s)':>18}{'DataLoader+decord (clips/s)':>28}{'ratio':>8}")
        print(f"{'clips':<12}{a:>18.2f}{c:>28.2f}{a / c:>7.2f}x")
    del ours_loader, their_loader, decord_dl
    make_videos(HD, 4, (1280, 720), 6)
    for name, data in (("400x300", DATA), ("1280x720", HD)):
        lone = lone_clips(data, (1, 0), ROUNDS)
        print(f"lone clips of 64 frames of {name}, one in flight, a 2-worker server: --video-decoder-threads=1 "
              f"{lone[1]:.2f} clips/s, automatic (0) {lone[0]:.2f} clips/s: {lone[0] / lone[1]:.2f}x")


if __name__ == "__main__":
    main()
