"""Video clips (video_clip(...)): a class-per-folder tree of videos made here
with Debian's ffmpeg (H.264 with B-frames in MP4, VP9 in WebM, a variable
frame rate in Matroska), served by real stoker-server processes on 127.0.0.1
and by local mode. Frames equal PyAV's decode (Debian's python3-av, the same
FFmpeg libraries) of the same presentation timestamps, exactly; plus
determinism, one draw per clip, exactly once through a server SIGKILL, and
the batch layouts."""

import os
import shutil
import signal
import subprocess

import numpy as np
import pytest

import stoker
from conftest import files_by_index, make_media_tree, write_shards

av = pytest.importorskip("av", reason="PyAV (Debian's python3-av) is the decoding reference")

if shutil.which("ffmpeg") is None:
    pytest.skip("Debian's ffmpeg makes the test videos (deploy/install-deps.sh installs it)", allow_module_level=True)

PATTERN = "-f lavfi -i testsrc2=size=80x60:rate=25:duration={d}"
VIDEOS = [
    ("a", "h264.mp4", PATTERN.format(d=1.6) + " -c:v libx264 -bf 2 -g 12 -pix_fmt yuv420p"),
    ("a", "vp9.webm", PATTERN.format(d=1.2) + " -c:v libvpx-vp9 -deadline realtime -g 10"),
    ("b", "vfr.mkv", PATTERN.format(d=2.0) + " -vf settb=1/1000,setpts='N*(N+30)/1000/TB' -fps_mode passthrough -enc_time_base 1/1000 -c:v libx264 -g 9"),
    ("b", "short.mp4", PATTERN.format(d=0.2) + " -c:v libx264"),
]


@pytest.fixture(scope="module")
def video_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("video")
    make_media_tree(root, VIDEOS)
    return root


def pyav_frames(path):
    """Every frame as PyAV decodes it, RGB, in presentation order."""
    with av.open(str(path)) as container:
        frames = [(f.pts, f.to_ndarray(format="rgb24")) for f in container.decode(video=0)]
    frames.sort(key=lambda f: f[0])
    return [f[1] for f in frames]


def uniform_frames(n, frames, stride, clips):
    """video_clip's uniform choice (stoker.proto): clip k starts at
    k (n - span) / (clips - 1), the middle for one clip; the last frame
    repeats past the end."""
    span = (frames - 1) * stride + 1
    room = max(0, n - span)
    out = []
    for k in range(clips):
        start = room // 2 if clips == 1 else int(np.floor(k * room / (clips - 1) + 0.5))
        out.append([min(n - 1, start + t * stride) for t in range(frames)])
    return out


def video_loader(servers, pipeline, **kw):
    args = dict(servers=servers, dataset="clips", pipeline=pipeline, batch_size=2, seed=5, device="cpu",
                dtype="uint8", layout="nhwc")
    args.update(kw)
    return stoker.Loader(**args)


def epoch(l, e=0):
    got = {}
    l.set_epoch(e)
    for batch, _ in l:
        for k, i in enumerate(l.last_batch["sample_indices"]):
            assert i not in got, f"sample {i} twice"
            got[i] = np.array(batch[k])
    return got


@pytest.fixture
def video_server(video_root, start_server):
    return start_server("--workers=2", root=str(video_root))


def test_frames_equal_pyav_at_the_same_timestamps(video_root, video_server):
    # center_crop(60) of an 80x60 frame is columns 10..69: pure indexing.
    l = video_loader(video_server.address, "video_clip(frames=4, stride=3, clips=2, mode=uniform), center_crop(60)")
    assert l.sample_shape == [2, 4, 60, 60, 3]
    got = epoch(l)
    paths = files_by_index(video_root / "clips")
    assert sorted(got) == list(range(len(paths)))
    for i, path in enumerate(paths):
        frames = pyav_frames(path)
        want = np.stack([np.stack([frames[f][:, 10:70] for f in clip])
                         for clip in uniform_frames(len(frames), 4, 3, 2)])
        assert got[i].shape == want.shape
        np.testing.assert_array_equal(got[i], want, err_msg=str(path))


def test_random_clips_are_deterministic_with_one_draw_per_clip(video_root, video_server):
    pipeline = "video_clip(frames=3, stride=2, mode=random), random_resized_crop(32), random_horizontal_flip(0.5)"
    a, b = epoch(video_loader(video_server.address, pipeline)), epoch(video_loader(video_server.address, pipeline))
    c = epoch(video_loader(video_server.address, pipeline), 1)
    for i in a:
        np.testing.assert_array_equal(a[i], b[i])
    assert any(not np.array_equal(a[i], c[i]) for i in a)
    # One draw per clip: with a random flip after uniform clips, every frame
    # of a clip is PyAV's frame flipped, or every one is not.
    flips = epoch(video_loader(video_server.address,
                               "video_clip(frames=3, stride=2, clips=3, mode=uniform), center_crop(60), "
                               "random_horizontal_flip(0.5)"))
    choices = []
    for i, path in enumerate(files_by_index(video_root / "clips")):
        frames = pyav_frames(path)
        for k, clip in enumerate(uniform_frames(len(frames), 3, 2, 3)):
            plain = [np.array_equal(flips[i][k][t], frames[f][:, 10:70]) for t, f in enumerate(clip)]
            flipped = [np.array_equal(flips[i][k][t], frames[f][:, 10:70][:, ::-1]) for t, f in enumerate(clip)]
            assert all(plain) or all(flipped), (path, k, plain, flipped)
            choices.append(all(flipped))
    assert any(choices) and not all(choices)  # both draws happen, clip by clip


def test_float_nchw_batches_and_local_mode(video_root, video_server):
    pipeline = "video_clip(frames=2, stride=1, mode=uniform), resize(48), center_crop(48)"
    remote = epoch(video_loader(video_server.address, pipeline, dtype="float32", layout="nchw", normalize=None))
    assert next(iter(remote.values())).shape == (2, 3, 48, 48)
    as_uint8 = epoch(video_loader(video_server.address, pipeline))
    for i in remote:
        np.testing.assert_allclose(remote[i], as_uint8[i].transpose(0, 3, 1, 2) / 255.0, atol=1e-6)
    local = epoch(video_loader(None, pipeline, local_workers=2, data_root=str(video_root)))
    for i in as_uint8:
        np.testing.assert_array_equal(local[i], as_uint8[i])


def test_exactly_once_through_a_server_sigkill(video_root, start_server):
    pipeline = "video_clip(frames=2, stride=2), center_crop(48)"
    a = start_server("--workers=1", "--test-sample-delay-ms=30", root=str(video_root))
    b = start_server("--workers=1", root=str(video_root))
    reference = epoch(video_loader(b.address, pipeline, batch_size=1))
    l = video_loader(f"{a.address},{b.address}", pipeline, batch_size=1, window=1)
    got = {}
    l.set_epoch(0)
    for n, (batch, _) in enumerate(l):
        got[l.last_batch["sample_indices"][0]] = np.array(batch[0])
        if n == 0:
            a.proc.send_signal(signal.SIGKILL)
    assert a.proc.wait(timeout=10) == -signal.SIGKILL
    assert sorted(got) == sorted(reference)
    for i in reference:
        np.testing.assert_array_equal(got[i], reference[i])


def test_bad_videos_fail_with_their_reason(video_root, tmp_path, start_server):
    root = tmp_path / "root"
    os.makedirs(root / "bad" / "x")
    good = video_root / "clips" / "a" / "h264.mp4"
    shutil.copy(good, root / "bad" / "x" / "good.mp4")
    (root / "bad" / "x" / "empty.mp4").write_bytes(b"")
    (root / "bad" / "x" / "text.mkv").write_bytes(b"not a video " * 500)
    subprocess.run(f"ffmpeg -v error -y -f lavfi -i sine=duration=1 -c:a libvorbis {root / 'bad' / 'x' / 'audio.webm'}",
                   shell=True, check=True, stdin=subprocess.DEVNULL)
    server = start_server("--workers=1", root=str(root))
    l = video_loader(server.address, "video_clip(frames=2), center_crop(48)", dataset="bad", batch_size=4)
    got = epoch(l)
    assert len(got) == 4  # the bad ones replaced by the good one
    log = open(server.log).read()
    for reason in ("empty", "corrupt", "unsupported"):
        assert reason in log, reason
    with pytest.raises(stoker.InvalidArgument, match="holds video files"):
        video_loader(server.address, "center_crop(32)", dataset="bad")


def test_webdataset_shards_of_videos_serve_their_clips_with_fields(video_root, video_server, start_server):
    paths = files_by_index(video_root / "clips")
    write_shards(video_root / "shards", [{p.suffix[1:]: p.read_bytes(), "txt": f"clip {i}: {p.name}".encode(),
                                          "cls": str(i % 3).encode()} for i, p in enumerate(paths)])
    pipeline = "video_clip(frames=4, stride=3, clips=2, mode=uniform), center_crop(60)"
    folder = epoch(video_loader(video_server.address, pipeline))
    l = video_loader(video_server.address, pipeline, dataset="shards",
                     fields={"video": None, "caption": "txt", "label": "cls"})
    assert l.sample_shape == [2, 4, 60, 60, 3]
    seen = set()
    l.set_epoch(0)
    for batch in l:
        for k, i in enumerate(l.last_batch["sample_indices"]):
            assert i not in seen
            seen.add(i)
            # The same clips as the class-per-folder tree of the same files (itself equal to PyAV).
            np.testing.assert_array_equal(np.array(batch["video"][k]), folder[i], err_msg=str(paths[i]))
            assert batch["caption"][k] == f"clip {i}: {paths[i].name}"
            assert int(batch["label"][k]) == i % 3
    assert sorted(seen) == list(range(len(paths)))
    # Without fields: (clips, labels), the labels from .cls.
    plain = video_loader(video_server.address, pipeline, dataset="shards")
    plain.set_epoch(0)
    for clips, labels in plain:
        for k, i in enumerate(plain.last_batch["sample_indices"]):
            np.testing.assert_array_equal(np.array(clips[k]), folder[i])
            assert int(labels[k]) == i % 3
    # Each video's index is kept in a folder beside its shard, for the shard as it is.
    shards = sorted((video_root / "shards").glob("*.tar"))
    sidecars = sorted((video_root / "shards").glob("*.tar.stoker-index-frames/*"))
    assert len(sidecars) == len(paths)
    for sidecar in sidecars:
        shard = video_root / "shards" / sidecar.parent.name.removesuffix(".stoker-index-frames")
        header = sidecar.read_text().split("\n")[0].split()
        assert header[:2] == ["stoker-video-index", "1"] and int(header[2]) == shard.stat().st_size, sidecar
    assert {s.parent.name for s in sidecars} == {f"{s.name}.stoker-index-frames" for s in shards}
    # A restarted server reads them; a damaged one is rebuilt; the clips are the same.
    sidecars[0].write_text("stoker-video-index 1 garbage\n")
    restarted = video_loader(start_server("--workers=1", root=str(video_root)).address, pipeline, dataset="shards")
    restarted.set_epoch(0)
    for clips, _ in restarted:
        for k, i in enumerate(restarted.last_batch["sample_indices"]):
            np.testing.assert_array_equal(np.array(clips[k]), folder[i])
    assert sidecars[0].read_text().split()[2] != "garbage"
    with pytest.raises(stoker.InvalidArgument, match="is the sample, read from member '.jpg'"):
        video_loader(video_server.address, pipeline, dataset="shards", fields={"video": "jpg", "caption": "txt"})
    with pytest.raises(stoker.InvalidArgument, match="'shards' holds video files"):
        video_loader(video_server.address, "center_crop(32)", dataset="shards")


AV_VIDEOS = [
    ("a", "aac.mp4", PATTERN.format(d=2.0) + " -f lavfi -i sine=frequency=440:sample_rate=44100:duration=2.0 "
                                             "-c:v libx264 -g 10 -pix_fmt yuv420p -c:a aac -ac 2"),
    ("b", "flac.mkv", PATTERN.format(d=1.6) + " -f lavfi -i sine=frequency=660:sample_rate=48000:duration=1.2 "
                                              "-c:v libx264 -g 8 -c:a flac"),
]


def pyav_track(path, rate):
    """The first audio stream as PyAV decodes and resamples it (float, its
    own channels, then their mean as Stoker mixes down), and its first
    frame's time in seconds; plus every video frame's time, in order."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        resampler = av.AudioResampler(format="fltp", layout=stream.layout.name, rate=rate)
        chunks, start = [], None
        for frame in container.decode(stream):
            if start is None:
                start = float(frame.pts * frame.time_base)
            frame.pts = None
            chunks += [f.to_ndarray() for f in resampler.resample(frame)]
        chunks += [f.to_ndarray() for f in resampler.resample(None)]
    with av.open(str(path)) as container:
        times = sorted(float(f.pts * f.time_base) for f in container.decode(video=0))
    return np.concatenate(chunks, axis=1).mean(axis=0), start, times


def test_a_videos_audio_track_is_a_field_aligned_with_its_clips(tmp_path, start_server):
    make_media_tree(tmp_path, AV_VIDEOS)
    os.makedirs(tmp_path / "mute" / "x")
    subprocess.run(f"ffmpeg -v error -y {PATTERN.format(d=1.0)} -c:v libx264 {tmp_path / 'mute' / 'x' / 'mute.mp4'}",
                   shell=True, check=True, stdin=subprocess.DEVNULL)
    shutil.copy(tmp_path / "clips" / "a" / "aac.mp4", tmp_path / "mute" / "x" / "sound.mp4")
    server = start_server("--workers=2", root=str(tmp_path))
    rate, seconds = 16000, 0.25
    pipeline = f"video_clip(frames=3, stride=4, clips=2, mode=uniform, audio_seconds={seconds}), center_crop(60)"
    l = video_loader(server.address, pipeline, fields="video, audio, label", bad_sample_policy="fail")
    got = {}
    l.set_epoch(0)
    for batch in l:
        assert tuple(batch["audio"].shape[1:]) == (2, 1, int(rate * seconds))
        for k, i in enumerate(l.last_batch["sample_indices"]):
            got[i] = (np.array(batch["video"][k]), np.array(batch["audio"][k]), int(batch["label"][k]))
    paths = files_by_index(tmp_path / "clips")
    assert sorted(got) == list(range(len(paths)))
    window = int(rate * seconds)
    for i, path in enumerate(paths):
        track, start, times = pyav_track(path, rate)
        clips = uniform_frames(len(times), 3, 4, 2)
        for k, clip in enumerate(clips):
            first = int(round((times[clip[0]] - start) * rate))
            want = np.zeros(window, np.float32)
            part = track[max(0, first):first + window]
            want[max(0, -first):max(0, -first) + len(part)] = part
            np.testing.assert_allclose(got[i][1][k, 0], want, atol=1e-4, err_msg=f"{path} clip {k}")
            if first < len(track):
                assert np.abs(got[i][1][k, 0]).max() > 0.05  # a tone (amplitude 1/8), not zeros
        assert got[i][2] == i  # classes a, b
    # The 1.2 s track of the 1.6 s video ends before its last clip starts (1.24 s): zeros.
    flac = [i for i, p in enumerate(paths) if p.name == "flac.mkv"][0]
    assert np.all(got[flac][1][1] == 0) and np.abs(got[flac][1][0]).max() > 0.05
    # A video without an audio stream fails its sample as missing_field (replaced under skip).
    mute = video_loader(server.address, pipeline, dataset="mute", fields="video, audio", batch_size=2)
    mute.set_epoch(0)
    batches = list(mute)
    assert len(batches) == 1 and len(mute.last_batch["failures"]) == 1
    assert "missing_field" in str(mute.last_batch["failures"])
    # Refused at open: no window length; a member; an image pipeline.
    with pytest.raises(stoker.InvalidArgument, match="audio_seconds"):
        video_loader(server.address, "video_clip(frames=2), center_crop(60)", fields="video, audio")
    with pytest.raises(stoker.InvalidArgument, match="own audio track"):
        video_loader(server.address, pipeline, fields="video, audio=mp4")


def test_the_index_is_kept_in_a_sidecar_that_a_restarted_server_reuses(video_root, tmp_path, start_server):
    root = tmp_path / "root"
    shutil.copytree(video_root / "clips", root / "clips")
    pipeline = "video_clip(frames=3, stride=2, clips=2, mode=random), center_crop(48)"
    first = epoch(video_loader(start_server("--workers=1", root=str(root)).address, pipeline))
    paths = files_by_index(root / "clips")
    for p in paths:
        header = open(f"{p}.stoker-index").readline().split()
        assert header[:2] == ["stoker-video-index", "1"] and int(header[2]) == p.stat().st_size, p
    # A new server reads the sidecars; a damaged one is rebuilt; the clips are the same.
    with open(f"{paths[0]}.stoker-index", "w") as f:
        f.write("stoker-video-index 1 garbage\n")
    second = epoch(video_loader(start_server("--workers=1", root=str(root)).address, pipeline))
    assert sorted(second) == sorted(first)
    for i in first:
        np.testing.assert_array_equal(second[i], first[i])
    assert open(f"{paths[0]}.stoker-index").readline().split()[2] == str(paths[0].stat().st_size)
