#include "dataplane/ops/video_ops.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/decode/video_decoder.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_text.h"
#include "gtest/gtest.h"
#include "tests/testdata/ffmpeg_files.h"
#include "tests/testdata/peak_rss.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;

using ::stoker::testing::HaveFfmpeg;

// A file made by Debian's ffmpeg (tests/testdata/ffmpeg_files.h).
std::string Made(const std::string& args, const std::string& name) { return testing::MadeByFfmpeg(args, name); }

const char* kPattern = "-f lavfi -i testsrc=size=64x48:rate=25:duration=1.2";

TEST(VideoClipTest, FramesOfEachMode) {
  v1::VideoClip clip;
  ASSERT_TRUE(CheckVideoClip("p", clip).ok());
  EXPECT_EQ(clip.frames(), 8);
  EXPECT_EQ(clip.stride(), 1);
  EXPECT_EQ(clip.clips(), 1);
  clip.set_frames(3);
  clip.set_stride(2);
  clip.set_clips(3);
  clip.set_mode(v1::VideoClip::UNIFORM);
  Rng rng(1);
  // Span 5 of 25 frames: starts 0, 10, 20.
  EXPECT_EQ(ClipFrames(clip, 25, rng), (std::vector<int64_t>{0, 2, 4, 10, 12, 14, 20, 22, 24}));
  // Shorter than a clip: the last frame repeats.
  clip.set_clips(1);
  EXPECT_EQ(ClipFrames(clip, 4, rng), (std::vector<int64_t>{0, 2, 3}));
  clip.set_mode(v1::VideoClip::RANDOM);
  std::vector<int> starts(21, 0);
  for (int i = 0; i < 2100; ++i) {
    const std::vector<int64_t> f = ClipFrames(clip, 25, rng);
    ASSERT_EQ(f[1], f[0] + 2);
    ++starts[static_cast<size_t>(f[0])];
  }
  for (int s = 0; s <= 20; ++s) EXPECT_GT(starts[s], 50) << s;
  v1::VideoClip bad;
  bad.set_frames(600);
  absl::Status s = CheckVideoClip("pipeline[0]", bad);
  EXPECT_NE(s.message().find("pipeline[0].video_clip.frames = 600"), std::string::npos) << s;
}

TEST(VideoDecoderTest, EveryCodecIndexesAndDecodesTheSameFramesFromASeek) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "Debian's ffmpeg tool is not installed (deploy/install-deps.sh installs it)";
  struct Case {
    const char* name;
    std::string args;
  };
  const std::string keys = " -g 8";  // a keyframe every 8 frames: seeks land mid-video
  const std::vector<Case> cases = {
      {"h264.mp4", absl::StrCat(kPattern, " -c:v libx264 -pix_fmt yuv420p", keys)},
      {"hevc.mp4", absl::StrCat(kPattern, " -c:v libx265 -x265-params log-level=none", keys)},
      {"vp9.webm", absl::StrCat(kPattern, " -c:v libvpx-vp9 -deadline realtime", keys)},
      {"av1.mkv", absl::StrCat(kPattern, " -c:v libaom-av1 -cpu-used 8", keys)},
      {"mpeg4.avi", absl::StrCat(kPattern, " -c:v mpeg4", keys)},
      // Variable frame rate: frame N at N (N + 40) / 1000 s.
      {"vfr.mkv", absl::StrCat(kPattern,
                               " -vf settb=1/1000,setpts='N*(N+40)/1000/TB' -fps_mode passthrough "
                               "-enc_time_base 1/1000 -c:v libx264",
                               keys)},
  };
  VideoLimits limits;
  for (const Case& c : cases) {
    const std::string bytes = Made(c.args, c.name);
    ASSERT_FALSE(bytes.empty()) << c.name;
    absl::StatusOr<VideoIndex> index = IndexVideo(bytes, limits);
    ASSERT_TRUE(index.ok()) << c.name << ": " << index.status();
    EXPECT_EQ(index->width, 64);
    EXPECT_EQ(index->height, 48);
    ASSERT_EQ(index->pts.size(), 30u) << c.name;
    const size_t frame = 64 * 48 * 3;
    std::vector<uint8_t> all(frame * 30);
    ASSERT_TRUE(DecodeVideoFrames(bytes, limits, index->pts, 64, 48, all.data()).ok()) << c.name;
    // A clip from the middle (after a seek), with a repeated frame.
    const std::vector<size_t> picks = {13, 15, 17, 17, 29};
    std::vector<int64_t> pts;
    for (size_t p : picks) pts.push_back(index->pts[p]);
    std::vector<uint8_t> some(frame * picks.size());
    absl::Status s = DecodeVideoFrames(bytes, limits, pts, 64, 48, some.data());
    ASSERT_TRUE(s.ok()) << c.name << ": " << s;
    for (size_t k = 0; k < picks.size(); ++k) {
      ASSERT_TRUE(std::equal(some.begin() + k * frame, some.begin() + (k + 1) * frame, all.begin() + picks[k] * frame))
          << c.name << " frame " << picks[k];
    }
    // Frames differ (the pattern moves): the right ones were taken.
    EXPECT_FALSE(std::equal(all.begin(), all.begin() + frame, all.begin() + 13 * frame)) << c.name;
    // Several decoder threads (decoder_threads.h) give the same frames.
    VideoLimits threaded = limits;
    threaded.decoder_threads = 4;
    std::vector<uint8_t> all4(all.size(), 0), some4(some.size(), 0);
    ASSERT_TRUE(DecodeVideoFrames(bytes, threaded, index->pts, 64, 48, all4.data()).ok()) << c.name;
    ASSERT_TRUE(DecodeVideoFrames(bytes, threaded, pts, 64, 48, some4.data()).ok()) << c.name;
    EXPECT_TRUE(all4 == all) << c.name << ": 4 decoder threads, the whole video";
    EXPECT_TRUE(some4 == some) << c.name << ": 4 decoder threads, a clip after a seek";
  }
}

TEST(VideoDecoderTest, EachKindOfBadInputFailsWithItsReason) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "Debian's ffmpeg tool is not installed";
  VideoLimits limits;
  auto reason = [&](const std::string& bytes) {
    absl::StatusOr<VideoIndex> index = IndexVideo(bytes, limits);
    if (index.ok()) {
      std::vector<uint8_t> out(static_cast<size_t>(index->width) * index->height * 3);
      absl::Status s = DecodeVideoFrames(bytes, limits, {index->pts.back()}, index->width, index->height, out.data());
      return s.ok() ? std::string("ok") : std::string(DecodeFailureName(DecodeFailureOf(s)));
    }
    return std::string(DecodeFailureName(DecodeFailureOf(index.status())));
  };
  EXPECT_EQ(reason(""), "empty");
  std::mt19937 rng(9);
  std::string noise(20000, '\0');
  for (char& ch : noise) ch = static_cast<char>(rng());
  EXPECT_EQ(reason(noise), "corrupt");
  EXPECT_EQ(reason(Made("-f lavfi -i sine=duration=1 -c:a libvorbis", "a.mkv")), "unsupported");
  const std::string avi = Made(absl::StrCat(kPattern, " -c:v mpeg4"), "v.avi");
  ASSERT_EQ(reason(avi), "ok");
  // A container header announcing 100,000 x 100,000 pixels (AVI's
  // BITMAPINFOHEADER): the size comes from the stream's own header, or the
  // file is refused; nothing of that size is made.
  std::string huge = avi;
  const size_t strf = huge.find("strf");
  ASSERT_NE(strf, std::string::npos);
  for (size_t at : {strf + 12, strf + 16}) {
    const uint32_t v = 100000;
    for (int i = 0; i < 4; ++i) huge[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  }
  absl::StatusOr<VideoIndex> huge_index = IndexVideo(huge, limits);
  if (huge_index.ok()) {
    EXPECT_EQ(huge_index->width, 64);
    EXPECT_EQ(huge_index->height, 48);
  } else {
    EXPECT_EQ(DecodeFailureOf(huge_index.status()), DecodeFailure::kTooLarge) << huge_index.status();
  }
  limits.max_pixels = 1000;  // 64 x 48 is over it
  EXPECT_EQ(reason(avi), "too_large") << IndexVideo(avi, limits).status();
  limits = VideoLimits();
  limits.max_frames = 10;
  EXPECT_EQ(reason(avi), "too_large");
  limits = VideoLimits();
  limits.max_seconds = 0.5;
  absl::StatusOr<VideoIndex> long_one = IndexVideo(avi, limits);
  ASSERT_FALSE(long_one.ok());
  EXPECT_NE(long_one.status().message().find("--max-media-seconds"), std::string::npos) << long_one.status();
  limits = VideoLimits();
  // Cut: the frames before the cut may stand; the last one is gone.
  const std::string mp4 = Made(absl::StrCat(kPattern, " -c:v libx264 -movflags +faststart"), "f.mp4");
  const std::string cut_reason = reason(mp4.substr(0, mp4.size() * 2 / 3));
  EXPECT_TRUE(cut_reason == "truncated" || cut_reason == "corrupt") << cut_reason;
}

v1::SessionConfig Session(const std::string& pipeline) {
  v1::SessionConfig c;
  c.set_batch_size(2);
  absl::StatusOr<std::vector<v1::Op>> ops = ParsePipelineText(pipeline);
  EXPECT_TRUE(ops.ok()) << ops.status();
  if (ops.ok()) {
    for (v1::Op& op : *ops) *c.add_pipeline() = op;
  }
  return c;
}

TEST(VideoPipelineTest, ShapesAndRefusals) {
  absl::StatusOr<Pipeline> p = Pipeline::Create(Session("video_clip(frames=4, stride=2), center_crop(32)"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->video());
  EXPECT_EQ(p->SampleShape(), (std::vector<int64_t>{4, 32, 32, 3}));
  EXPECT_EQ(p->sample_bytes(), 4 * 32 * 32 * 3);
  v1::SessionConfig c = Session("video_clip(frames=2, clips=3), resize(40), center_crop(32)");
  c.set_layout(v1::NCHW);
  c.set_dtype(v1::FLOAT32);
  p = Pipeline::Create(c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->SampleShape(), (std::vector<int64_t>{3, 2, 3, 32, 32}));
  EXPECT_EQ(p->sample_bytes(), 3 * 2 * 3 * 32 * 32 * 4);
  auto error = [](const std::string& text) {
    absl::StatusOr<Pipeline> q = Pipeline::Create(Session(text));
    EXPECT_FALSE(q.ok()) << text;
    return q.ok() ? std::string() : std::string(q.status().message());
  };
  EXPECT_NE(error("center_crop(32), video_clip()").find("must be the first op"), std::string::npos);
  EXPECT_NE(error("video_clip(frames=1000), center_crop(8)").find("video_clip.frames = 1000"), std::string::npos);
  EXPECT_NE(error("video_clip()").find("not fixed"), std::string::npos);
  v1::SessionConfig cached = Session("video_clip(), center_crop(8)");
  cached.set_cache_mode(v1::CACHE_DECODED);
  EXPECT_NE(Pipeline::Create(cached).status().message().find("CACHE_DECODED"), std::string::npos);
}

TEST(VideoPipelineTest, AnAudioTrackFieldHasTheShapeTheOpAsksForAndIsRefusedElsewhere) {
  auto with_track = [](const std::string& text) {
    v1::SessionConfig c = Session(text);
    v1::FieldSpec* image = c.add_fields();
    image->set_name("video");
    image->set_kind(v1::IMAGE);
    v1::FieldSpec* track = c.add_fields();
    track->set_name("audio");
    track->set_kind(v1::AUDIO_TRACK);
    return c;
  };
  absl::StatusOr<Pipeline> p =
      Pipeline::Create(with_track("video_clip(frames=2, clips=3, audio_seconds=0.25), center_crop(8)"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->audio_track_shape(), (std::vector<int64_t>{3, 1, 4000}));  // 16 kHz mono by default
  p = Pipeline::Create(with_track("video_clip(audio_rate=8000, audio_channels=2, audio_seconds=1), center_crop(8)"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->audio_track_shape(), (std::vector<int64_t>{2, 8000}));
  EXPECT_TRUE(Pipeline::Create(Session("video_clip(), center_crop(8)"))->audio_track_shape().empty());
  auto error = [&](const std::string& text) {
    absl::StatusOr<Pipeline> q = Pipeline::Create(with_track(text));
    EXPECT_FALSE(q.ok()) << text;
    return q.ok() ? std::string() : std::string(q.status().message());
  };
  EXPECT_NE(error("video_clip(), center_crop(8)").find("audio_seconds"), std::string::npos);
  EXPECT_NE(error("video_clip(audio_seconds=1, audio_rate=10), center_crop(8)").find("audio_rate = 10"),
            std::string::npos);
  EXPECT_NE(error("video_clip(audio_seconds=1, audio_channels=9), center_crop(8)").find("audio_channels = 9"),
            std::string::npos);
  EXPECT_NE(error("center_crop(8)").find("must start with video_clip"), std::string::npos);
  v1::SessionConfig member = with_track("video_clip(audio_seconds=1), center_crop(8)");
  member.mutable_fields(1)->add_extensions("wav");
  EXPECT_NE(Pipeline::Create(member).status().message().find("own audio track"), std::string::npos);
}

TEST(VideoPipelineTest, OneRandomDrawPerClipAndDeterminism) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "Debian's ffmpeg tool is not installed";
  const std::string video = Made(absl::StrCat(kPattern, " -c:v libx264 -g 8"), "c.mp4");
  absl::StatusOr<Pipeline> p =
      Pipeline::Create(Session("video_clip(frames=3, clips=2, mode=random), random_resized_crop(24), "
                               "random_horizontal_flip(0.5)"));
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<uint8_t> a(static_cast<size_t>(p->sample_bytes())), b(a.size());
  SampleTimes times;
  VideoLimits limits;
  Rng r1 = Rng::ForSample(3, 0, 1), r2 = Rng::ForSample(3, 0, 1);
  ASSERT_TRUE(p->ProduceVideo(video, r1, limits, a.data(), &times).ok());
  ASSERT_TRUE(p->ProduceVideo(video, r2, limits, b.data(), &times).ok());
  EXPECT_EQ(a, b);
  EXPECT_GT(times.decode, absl::ZeroDuration());
  // The same crop on every frame of a clip: a clip of one frame repeated
  // (a still video) gives equal frames.
  const std::string still = Made(
      "-f lavfi -i color=c=red:size=64x48:rate=25:duration=0.4,"
      "drawbox=x=10:y=5:w=20:h=30:color=blue@1:t=fill -c:v libx264 -qp 0 -pix_fmt yuv444p",
      "s.mp4");
  for (uint64_t sample = 0; sample < 6; ++sample) {
    Rng r = Rng::ForSample(5, 0, sample);
    ASSERT_TRUE(p->ProduceVideo(still, r, limits, a.data(), &times).ok());
    const size_t frame = 24 * 24 * 3;
    for (int k = 0; k < 2; ++k) {
      for (int t = 1; t < 3; ++t) {
        ASSERT_TRUE(
            std::equal(a.begin() + (k * 3 + t) * frame, a.begin() + (k * 3 + t + 1) * frame, a.begin() + k * 3 * frame))
            << "sample " << sample << " clip " << k << " frame " << t;
      }
    }
  }
}

// A clip's frames go through the ops as they are decoded: 16 frames of
// 1920x1080 (100 MB of RGB together) hold one frame at a time (the clip's
// bytes are checked against PyAV and torchvision in python/tests).
TEST(VideoPipelineTest, AClipHoldsOneDecodedFrameAtATime) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "Debian's ffmpeg tool is not installed";
  const std::string video =
      Made("-f lavfi -i testsrc2=size=1920x1080:rate=25:duration=1 -c:v libx264 -g 50", "big.mp4");
  absl::StatusOr<Pipeline> p =
      Pipeline::Create(Session("video_clip(frames=16, mode=uniform), resize(32), center_crop(32)"));
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<uint8_t> clip(static_cast<size_t>(p->sample_bytes()));
  SampleTimes times;
  VideoLimits limits;
  Rng rng = Rng::ForSample(1, 0, 0);
  absl::Status made;
  const int64_t growth =
      testing::PeakRssGrowth([&] { made = p->ProduceVideo(video, rng, limits, clip.data(), &times); });
  ASSERT_TRUE(made.ok()) << made;
  EXPECT_NE(std::count(clip.begin(), clip.end(), 0), static_cast<std::ptrdiff_t>(clip.size()));
  if (growth < 0) GTEST_SKIP() << testing::PeakRssSkipReason();
  EXPECT_LT(growth, int64_t{60} << 20) << "peak RSS grew by " << growth;
}

}  // namespace
}  // namespace stoker
