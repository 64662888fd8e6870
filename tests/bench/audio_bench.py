#!/usr/bin/python3
"""Audio windows per core (issue 34): Stoker against a torch DataLoader that
decodes the same files with PyAV and computes the same features with
torchaudio, in one run.

Clips: BENCH_CLIPS (default 120) files of 6 to 12 s made with Debian's
ffmpeg from its own sources (tones and coloured noise), a third each FLAC
at 44.1 kHz stereo, MP3 at 44.1 kHz stereo and Ogg Vorbis at 48 kHz mono, in
two classes, under .bench/audio-N (made once).

Both sides take a random 4 s window at 16 kHz mono (PyAV's AudioResampler,
libswresample's default filter, as Stoker; mono as the mean of the channels),
and then, in the second case, a 64-band log-mel spectrogram (torchaudio's
MelSpectrogram(n_fft=400, hop_length=160, n_mels=64) and AmplitudeToDB).

- Stoker: local mode with one worker thread (local_workers=1): the whole
  data plane on one core, the training loop taking batches of 16.
- DataLoader: num_workers=1, batch_size=16: one worker process decoding.

Each side's loader is made once (the DataLoader's worker persistent), runs
one warm-up epoch and then WINDOWS_ROUNDS (3) epochs over the clips,
alternated; the medians are printed with the ratio (goal: 2x).

Usage: tests/bench/audio_bench.py [BUILD_DIR]
"""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
CLIPS = int(os.environ.get("BENCH_CLIPS", "120"))
ROUNDS = int(os.environ.get("WINDOWS_ROUNDS", "3"))
DATA = os.path.join(ROOT, ".bench", f"audio-{CLIPS}")
sys.path.insert(0, os.path.join(BUILD, "python"))
os.environ.setdefault("STOKER_LOG_LEVEL", "1")

RATE, SECONDS, BATCH = 16000, 4.0, 16
WINDOW = int(RATE * SECONDS)
MEL = dict(n_fft=400, hop=160, n_mels=64)


def make_clips():
    if os.path.exists(os.path.join(DATA, ".done")):
        return
    formats = [("flac", "-ac 2 -ar 44100"), ("mp3", "-ac 2 -ar 44100 -c:a libmp3lame -b:a 128k"),
               ("ogg", "-ac 1 -ar 48000 -c:a libvorbis")]
    for i in range(CLIPS):
        cls = ("tone", "noise")[i % 2]
        os.makedirs(os.path.join(DATA, cls), exist_ok=True)
        seconds = 6 + (i * 7) % 7
        source = (f"sine=frequency={200 + 13 * i}:sample_rate=48000:duration={seconds}" if cls == "tone" else
                  f"anoisesrc=color={('pink', 'white', 'brown')[i % 3]}:sample_rate=48000:duration={seconds}:seed={i}")
        ext, args = formats[i % 3]
        subprocess.run(f"ffmpeg -v error -y -f lavfi -i {source} {args} {DATA}/{cls}/{i:04d}.{ext}", shell=True,
                       check=True, stdin=subprocess.DEVNULL)
    open(os.path.join(DATA, ".done"), "w").close()


class PyAvClips:
    """The DataLoader side: a torch Dataset of (window or mel, label)."""

    def __init__(self, mel):
        self.files = sorted(os.path.join(d, f) for d, _, fs in os.walk(DATA) for f in fs if not f.startswith("."))
        self.mel = mel
        self._transforms = None

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        import av
        import numpy as np
        import torch
        import torchaudio
        with av.open(self.files[i]) as container:
            stream = container.streams.audio[0]
            resampler = av.AudioResampler(format="fltp", layout=stream.layout.name, rate=RATE)
            chunks = []
            for frame in container.decode(stream):
                frame.pts = None
                chunks += [f.to_ndarray() for f in resampler.resample(frame)]
            chunks += [f.to_ndarray() for f in resampler.resample(None)]
        wave = np.concatenate(chunks, axis=1).mean(axis=0).astype(np.float32)
        start = np.random.randint(0, max(1, len(wave) - WINDOW + 1))
        window = np.zeros(WINDOW, np.float32)
        piece = wave[start:start + WINDOW]
        window[:len(piece)] = piece
        x = torch.from_numpy(window)[None]
        if self.mel:
            if self._transforms is None:
                self._transforms = (torchaudio.transforms.MelSpectrogram(
                    sample_rate=RATE, n_fft=MEL["n_fft"], hop_length=MEL["hop"], n_mels=MEL["n_mels"]),
                    torchaudio.transforms.AmplitudeToDB("power"))
            x = self._transforms[1](self._transforms[0](x))
        return x, int("noise" in self.files[i])


def dataloader(mel):
    import torch
    torch.set_num_threads(1)
    return torch.utils.data.DataLoader(PyAvClips(mel), batch_size=BATCH, shuffle=True, num_workers=1,
                                       persistent_workers=True)


def run_dataloader(loader):
    t0 = time.perf_counter()
    n = 0
    for x, _ in loader:
        n += x.shape[0]
    return n / (time.perf_counter() - t0)


def stoker_loader(mel):
    import stoker
    pipeline = f"audio(rate={RATE}, seconds={SECONDS}, crop=random)"
    if mel:
        pipeline += f", mel_spectrogram(n_fft={MEL['n_fft']}, hop={MEL['hop']}, n_mels={MEL['n_mels']})"
    l = stoker.Loader(dataset=os.path.basename(DATA), data_root=os.path.dirname(DATA), local_workers=1,
                      pipeline=pipeline, batch_size=BATCH, device="cpu", seed=1)
    return l


def run_stoker(l, epoch):
    l.set_epoch(epoch)
    t0 = time.perf_counter()
    n = 0
    for x, _ in l:
        n += x.shape[0]
    return n / (time.perf_counter() - t0)


def main():
    make_clips()
    print(f"{CLIPS} clips of 6-12 s (FLAC 44.1 kHz stereo, MP3 44.1 kHz stereo, Vorbis 48 kHz mono) in {DATA}; "
          f"random {SECONDS:g} s windows at {RATE} Hz mono, batches of {BATCH}; one core each side")
    print(f"{'features':<28}{'Stoker (windows/s)':>20}{'DataLoader+PyAV (windows/s)':>30}{'ratio':>8}")
    for mel in (False, True):
        ours_loader, their_loader = stoker_loader(mel), dataloader(mel)
        run_stoker(ours_loader, 0)  # warm-up: page cache, the module loaded, the worker started
        run_dataloader(their_loader)
        ours, theirs = [], []
        for r in range(ROUNDS):
            ours.append(run_stoker(ours_loader, r + 1))
            theirs.append(run_dataloader(their_loader))
        a, b = statistics.median(ours), statistics.median(theirs)
        name = "log-mel 64 bands" if mel else "waveform"
        print(f"{name:<28}{a:>20.1f}{b:>30.1f}{a / b:>7.2f}x")


if __name__ == "__main__":
    main()
