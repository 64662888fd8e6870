"""Audio samples (audio(...), mel_spectrogram(...)): a class-per-folder tree of
WAV, FLAC, MP3, Ogg Vorbis and Opus files made here with Debian's ffmpeg,
served by real stoker-server processes on 127.0.0.1 and by local mode, and
compared with the references: PyAV (Debian's python3-av, on the same FFmpeg
libraries) for the decoded and resampled waveform, torchaudio (Debian's
python3-torchaudio) for the mel spectrogram. Also: determinism, exactly once
through a server SIGKILL, resume, and bad files failing with their reason."""

import os
import shutil
import signal

import numpy as np
import pytest

import stoker
from conftest import files_by_index, make_media_tree, write_shards

av = pytest.importorskip("av", reason="PyAV (Debian's python3-av) is the decoding reference")
torchaudio = pytest.importorskip("torchaudio", reason="torchaudio (Debian's python3-torchaudio) is the mel reference")
import torch  # noqa: E402

if shutil.which("ffmpeg") is None:
    pytest.skip("Debian's ffmpeg makes the test clips (deploy/install-deps.sh installs it)", allow_module_level=True)

# (class, file, ffmpeg arguments): rates, channel counts, codecs and lengths differ.
CLIPS = [
    ("tone", "a.wav", "-f lavfi -i sine=frequency=440:sample_rate=44100:duration=1.7 -ac 2"),
    ("tone", "b.flac", "-f lavfi -i sine=frequency=660:sample_rate=48000:duration=2.3"),
    ("tone", "c.mp3", "-f lavfi -i sine=frequency=330:sample_rate=44100:duration=1.1 -c:a libmp3lame"),
    ("tone", "d.ogg", "-f lavfi -i sine=frequency=550:sample_rate=22050:duration=2.9 -c:a libvorbis"),
    ("noise", "e.opus", "-f lavfi -i anoisesrc=color=pink:sample_rate=48000:duration=1.9:seed=3 -c:a libopus"),
    ("noise", "f.wav", "-f lavfi -i anoisesrc=color=white:sample_rate=16000:duration=0.6:seed=4 -ac 3"),
    ("noise", "g.flac", "-f lavfi -i anoisesrc=color=brown:sample_rate=8000:duration=3.1:seed=5"),
    ("noise", "h.m4a", "-f lavfi -i anoisesrc=color=pink:sample_rate=32000:duration=1.4:seed=6 -c:a aac"),
]
RATE, SECONDS = 16000, 1.0
WINDOW = int(RATE * SECONDS)


@pytest.fixture(scope="module")
def audio_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("audio")
    make_media_tree(root, CLIPS)
    # Bad files beside good ones: zero bytes, cut in half, not audio at all.
    bad = root / "bad" / "x"
    os.makedirs(bad)
    shutil.copy(root / "clips" / "tone" / "b.flac", bad / "good.flac")
    (bad / "empty.wav").write_bytes(b"")
    flac = (root / "clips" / "tone" / "b.flac").read_bytes()
    (bad / "cut.flac").write_bytes(flac[: len(flac) // 2])
    (bad / "text.mp3").write_bytes(b"this is not an mp3 file at all " * 100)
    return root


def reference_waveform(path, rate):
    """PyAV: the first audio stream decoded and resampled (the same
    libswresample, its default filter) to float planar at `rate`, keeping
    the channels; then their mean, as Stoker mixes down."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        resampler = av.AudioResampler(format="fltp", layout=stream.layout.name, rate=rate)
        chunks = []
        for frame in container.decode(stream):
            frame.pts = None
            chunks += [f.to_ndarray() for f in resampler.resample(frame)]
        chunks += [f.to_ndarray() for f in resampler.resample(None)]
    return np.concatenate(chunks, axis=1).mean(axis=0)


def audio_loader(servers, pipeline, **kw):
    args = dict(servers=servers, dataset="clips", pipeline=pipeline, batch_size=2, seed=11, device="cpu")
    args.update(kw)
    return stoker.Loader(**args)


def epoch(l, e=0):
    """{sample index: waveform or spectrogram} and labels for one epoch."""
    got, labels = {}, {}
    l.set_epoch(e)
    for batch, y in l:
        for k, i in enumerate(l.last_batch["sample_indices"]):
            assert i not in got, f"sample {i} twice"
            got[i] = np.array(batch[k])
            labels[i] = int(y[k])
    return got, labels


@pytest.fixture
def audio_server(audio_root, start_server):
    return start_server("--workers=2", root=str(audio_root))


def test_waveforms_equal_pyav_resampling(audio_root, audio_server):
    l = audio_loader(audio_server.address, f"audio(rate={RATE}, seconds={SECONDS}, crop=start)")
    assert l.sample_shape == [1, WINDOW]
    got, labels = epoch(l)
    paths = files_by_index(audio_root / "clips")
    assert sorted(got) == list(range(len(paths)))
    for i, path in enumerate(paths):
        ref = reference_waveform(path, RATE)[:WINDOW]
        ref = np.pad(ref, (0, WINDOW - len(ref)))  # pad=zero past the end
        assert got[i].shape == (1, WINDOW) and got[i].dtype == np.float32
        np.testing.assert_allclose(got[i][0], ref, atol=1e-4, err_msg=str(path))
        assert labels[i] == (0 if "noise" in str(path) else 1)  # classes sorted: noise, tone
    # A 0.6 s clip in a 1 s window: zeros after it.
    short = [i for i, p in enumerate(paths) if p.name == "f.wav"][0]
    assert np.all(got[short][0, int(0.62 * RATE):] == 0) and np.any(got[short][0, : int(0.5 * RATE)] != 0)


def test_int16_waveforms_are_the_float_ones_converted_and_half_the_bytes(audio_root, audio_server):
    pipeline = f"audio(rate={RATE}, seconds=0.5, crop=random)"
    floats, _ = epoch(audio_loader(audio_server.address, pipeline))
    l = audio_loader(audio_server.address, f"audio(rate={RATE}, seconds=0.5, crop=random, format=int16)")
    ints, _ = epoch(l)
    paths = files_by_index(audio_root / "clips")
    assert sorted(ints) == list(range(len(paths)))
    for i in ints:
        assert ints[i].dtype == np.int16 and ints[i].shape == floats[i].shape
        # FFmpeg's float to s16: round(x * 32768), clamped.
        want = np.clip(np.rint(floats[i].astype(np.float64) * 32768), -32768, 32767).astype(np.int16)
        np.testing.assert_array_equal(ints[i], want, err_msg=str(paths[i]))
    assert max(int(np.abs(v).max()) for v in ints.values()) > 1000  # not silence
    with pytest.raises(stoker.InvalidArgument, match="a mel spectrogram is float32"):
        audio_loader(audio_server.address, f"audio(rate={RATE}, format=int16), mel_spectrogram()")


def test_random_windows_are_slices_of_the_stream_and_deterministic(audio_root, audio_server):
    pipeline = f"audio(rate={RATE}, seconds=0.5, crop=random)"
    a, _ = epoch(audio_loader(audio_server.address, pipeline))
    b, _ = epoch(audio_loader(audio_server.address, pipeline))
    c, _ = epoch(audio_loader(audio_server.address, pipeline), 1)
    paths = files_by_index(audio_root / "clips")
    starts = set()
    for i, path in enumerate(paths):
        np.testing.assert_array_equal(a[i], b[i])
        ref = reference_waveform(path, RATE)
        w = a[i][0]
        if len(ref) <= len(w):
            continue
        errors = [np.abs(ref[s:s + len(w)] - w).max() for s in range(len(ref) - len(w) + 1)]
        assert min(errors) < 1e-4, path
        starts.add(int(np.argmin(errors)))
    assert len(starts) > 3  # not all at one place
    assert any(not np.array_equal(a[i], c[i]) for i in a)  # another epoch, other windows


def test_mel_spectrograms_equal_torchaudio(audio_root, audio_server):
    params = dict(n_fft=512, hop=128, n_mels=40, f_min=30.0, f_max=7000.0)
    text = ", ".join(f"{k}={v}" for k, v in params.items())
    waves, _ = epoch(audio_loader(audio_server.address, f"audio(rate={RATE}, seconds={SECONDS}, crop=center)"))
    for log in (False, True):
        l = audio_loader(audio_server.address,
                         f"audio(rate={RATE}, seconds={SECONDS}, crop=center), mel_spectrogram({text}, log={str(log).lower()})")
        frames = 1 + WINDOW // params["hop"]
        assert l.sample_shape == [1, params["n_mels"], frames]
        got, _ = epoch(l)
        mel = torchaudio.transforms.MelSpectrogram(sample_rate=RATE, n_fft=params["n_fft"], hop_length=params["hop"],
                                                   n_mels=params["n_mels"], f_min=params["f_min"],
                                                   f_max=params["f_max"])
        to_db = torchaudio.transforms.AmplitudeToDB("power")
        for i, wave in waves.items():
            ref = mel(torch.from_numpy(wave))
            if log:
                # Within 1e-3 relative where the power is within 60 dB of
                # the clip's peak; below that both sides are float32 FFT
                # rounding of near-silence: both at least 50 dB down.
                audible = (ref > 1e-6 * ref.max()).numpy()
                ref = to_db(ref).numpy()
                np.testing.assert_allclose(got[i][audible], ref[audible], rtol=1e-3, atol=1e-3)
                assert np.all(got[i][~audible] < ref.max() - 50)
            else:
                np.testing.assert_allclose(got[i], ref.numpy(), rtol=1e-3, atol=1e-6 * float(ref.max()))


def test_local_mode_gives_the_servers_samples(audio_root, audio_server):
    pipeline = f"audio(rate={RATE}, seconds=0.5), mel_spectrogram(n_mels=32)"
    remote, _ = epoch(audio_loader(audio_server.address, pipeline))
    local, _ = epoch(audio_loader(None, pipeline, local_workers=2, data_root=str(audio_root)))
    assert sorted(local) == sorted(remote)
    for i in remote:
        np.testing.assert_array_equal(local[i], remote[i])


def test_exactly_once_through_a_server_sigkill_and_resume(audio_root, start_server):
    pipeline = f"audio(rate={RATE}, seconds=0.5)"
    a = start_server("--workers=1", "--test-sample-delay-ms=30", root=str(audio_root))
    b = start_server("--workers=1", root=str(audio_root))
    reference, _ = epoch(audio_loader(b.address, pipeline, batch_size=1))
    l = audio_loader(f"{a.address},{b.address}", pipeline, batch_size=1, window=1)
    got = {}
    l.set_epoch(0)
    for n, (batch, _) in enumerate(l):
        for k, i in enumerate(l.last_batch["sample_indices"]):
            assert i not in got
            got[i] = np.array(batch[k])
        if n == 1:
            a.proc.send_signal(signal.SIGKILL)
    assert a.proc.wait(timeout=10) == -signal.SIGKILL
    assert sorted(got) == sorted(reference)
    for i in reference:
        np.testing.assert_array_equal(got[i], reference[i])
    # Resume: a state after three batches, loaded by a new loader, gives the rest.
    first = audio_loader(b.address, pipeline, batch_size=1)
    first.set_epoch(0)
    seen = {}
    for batch, _ in first:
        seen[first.last_batch["sample_indices"][0]] = np.array(batch[0])
        if len(seen) == 3:
            state = first.state_dict()
            break
    second = audio_loader(b.address, pipeline, batch_size=1)
    second.load_state_dict(state)
    second.set_epoch(0)
    rest, _ = epoch(second)
    assert sorted(list(seen) + list(rest)) == sorted(reference)
    for i, w in {**seen, **rest}.items():
        np.testing.assert_array_equal(w, reference[i])


def test_bad_files_fail_with_their_reason_and_the_rest_is_served(audio_root, start_server):
    server = start_server("--workers=1", root=str(audio_root))
    l = audio_loader(server.address, f"audio(rate={RATE}, seconds=0.5)", dataset="bad", batch_size=4,
                     bad_sample_policy="fail")
    l.set_epoch(0)
    with pytest.raises(stoker.DataLoss) as e:
        for _ in l:
            pass
    assert any(word in str(e.value) for word in ("empty", "truncated", "corrupt")), str(e.value)
    # Under skip, the bad samples are replaced by good ones and counted by reason.
    l = audio_loader(server.address, f"audio(rate={RATE}, seconds=0.5)", dataset="bad", batch_size=4)
    got, _ = epoch(l)
    assert len(got) == 4 and all(np.any(w != 0) for w in got.values())
    log = open(server.log).read()
    for reason in ("empty", "truncated", "corrupt"):
        assert reason in log, reason
    # The pipeline and the dataset must agree.
    with pytest.raises(stoker.InvalidArgument, match="holds audio files"):
        audio_loader(server.address, "center_crop(32)")
    with pytest.raises(stoker.InvalidArgument, match="image ops do not apply"):
        audio_loader(server.address, "audio(), center_crop(32)")


def test_webdataset_shards_of_audio_serve_their_samples_with_fields(audio_root, audio_server):
    paths = files_by_index(audio_root / "clips")
    write_shards(audio_root / "shards", [{"json": b'{"i": %d}' % i, p.suffix[1:]: p.read_bytes(), "cls": b"%d" % (i % 2)}
                                         for i, p in enumerate(paths)], per_shard=3)
    pipeline = f"audio(rate={RATE}, seconds=0.5, crop=random), mel_spectrogram(n_mels=32)"
    folder, _ = epoch(audio_loader(audio_server.address, pipeline))
    l = audio_loader(audio_server.address, pipeline, dataset="shards", fields={"audio": None, "meta": "json"})
    seen = set()
    l.set_epoch(0)
    for batch in l:
        for k, i in enumerate(l.last_batch["sample_indices"]):
            seen.add(i)
            # The same windows as the class-per-folder tree of the same files (itself equal to PyAV).
            np.testing.assert_array_equal(np.array(batch["audio"][k]), folder[i], err_msg=str(paths[i]))
            assert batch["meta"][k] == b'{"i": %d}' % i
    assert sorted(seen) == list(range(len(paths)))
    labels = epoch(audio_loader(audio_server.address, pipeline, dataset="shards"))[1]
    assert labels == {i: i % 2 for i in range(len(paths))}
    with pytest.raises(stoker.InvalidArgument, match="is the sample, read from member '.mp4'"):
        audio_loader(audio_server.address, pipeline, dataset="shards", fields={"audio": "mp4"})
