// Windows of long audio without the whole stream: DecodeAudioCrop and
// DecodeAudioWindows give the samples a whole decode has (the same window,
// byte for byte), through the exact-grid path (resampler started a pre-roll
// before the window, the length counted from the input) and the fallback
// (a rate pair without an exact grid), while holding the window, not the file.
#include "dataplane/decode/audio_decoder.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rng.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/decode/media_abi.h"
#include "dataplane/decode/media_loader.h"
#include "dataplane/ops/audio_ops.h"
#include "gtest/gtest.h"
#include "tests/testdata/ffmpeg_files.h"
#include "tests/testdata/peak_rss.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;

using ::stoker::testing::HaveFfmpeg;

// A file made by Debian's ffmpeg (tests/testdata/ffmpeg_files.h).
std::string Made(const std::string& args, const std::string& name) { return testing::MadeByFfmpeg(args, name); }

// Noise with a tone, `seconds` long, at `rate` with `channels`.
std::string Noise(double seconds, int rate, int channels, const std::string& codec_args, const std::string& name) {
  return Made(absl::StrCat("-f lavfi -i anoisesrc=d=", seconds, ":r=", rate,
                           ":a=0.3:s=5 -f lavfi -i sine=f=440:r=", rate, ":d=", seconds,
                           " -filter_complex amix=inputs=2,aformat=channel_layouts=", channels == 1 ? "mono" : "stereo",
                           " ", codec_args),
              name);
}

// The whole decode cut as AudioWindow cuts it: the reference.
std::vector<float> WholeThenCut(const std::string& bytes, const AudioDecodeOptions& o, int64_t window,
                                v1::Audio::Crop crop, uint64_t seed) {
  absl::StatusOr<Waveform> w = DecodeAudio(bytes, o);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return {};
  std::vector<float> out(static_cast<size_t>(o.channels * window));
  Rng rng(seed);
  AudioWindow(w->samples.data(), o.channels, w->frames, window, crop, rng, out.data());
  return out;
}

std::vector<float> Cropped(const std::string& bytes, const AudioDecodeOptions& o, int64_t window, v1::Audio::Crop crop,
                           uint64_t seed) {
  Rng rng(seed);
  absl::StatusOr<std::vector<float>> got =
      DecodeAudioCrop(bytes, o, window, [&](int64_t frames) { return AudioWindowStart(frames, window, crop, rng); });
  EXPECT_TRUE(got.ok()) << got.status();
  return got.ok() ? *got : std::vector<float>();
}

TEST(AudioDecodeCropTest, ALongStreamsWindowIsTheWholeDecodesWindowByteForByte) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "Debian's ffmpeg is not installed: no test files can be made";
  struct Case {
    std::string name, bytes;
    int rate, channels;  // asked for
  };
  const std::vector<Case> cases = {
      // 44.1 kHz FLAC to 16 kHz mono: an exact grid (160 phases), 70 s > 4 MiB.
      {"flac 44100 -> 16000 x1", Noise(70, 44100, 1, "-c:a flac", "a.flac"), 16000, 1},
      // MP3 (decoder state across frames) to 48 kHz stereo: 320 phases.
      {"mp3 22050 -> 48000 x2", Noise(12, 22050, 2, "-c:a libmp3lame -b:a 64k", "a.mp3"), 48000, 2},
      // Opus to 44.1 kHz mono: 147 phases.
      {"opus 48000 -> 44100 x1", Noise(25, 48000, 2, "-c:a libopus -b:a 48k", "a.opus"), 44100, 1},
      // No exact grid (44056 Hz: 11014 phases): counted and cut from the start.
      {"wav 44100 -> 44056 x1", Noise(25, 44100, 1, "-c:a pcm_s16le", "a.wav"), 44056, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_FALSE(c.bytes.empty());
    AudioDecodeOptions o;
    o.rate = c.rate;
    o.channels = c.channels;
    const int64_t window = c.rate;  // 1 s
    const double frames_held = static_cast<double>(kWholeAudioBytes) / (4.0 * c.channels);
    ASSERT_GT(DecodeAudio(c.bytes, o)->frames, frames_held) << "too short to take the windowed path";
    for (auto [crop, seed] : std::vector<std::pair<v1::Audio::Crop, uint64_t>>{{v1::Audio::RANDOM, 1},
                                                                               {v1::Audio::RANDOM, 2},
                                                                               {v1::Audio::RANDOM, 3},
                                                                               {v1::Audio::CENTER, 0},
                                                                               {v1::Audio::START, 0}}) {
      const std::vector<float> want = WholeThenCut(c.bytes, o, window, crop, seed);
      const std::vector<float> got = Cropped(c.bytes, o, window, crop, seed);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_TRUE(got == want) << "crop " << crop << " seed " << seed;
    }
  }
}

TEST(AudioDecodeCropTest, AShortStreamIsDecodedOnceAndPadded) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "Debian's ffmpeg is not installed: no test files can be made";
  const std::string flac = Noise(0.5, 16000, 1, "-c:a flac", "s.flac");
  AudioDecodeOptions o;
  int calls = 0;
  absl::StatusOr<std::vector<float>> got = DecodeAudioCrop(flac, o, 16000, [&](int64_t frames) {
    ++calls;
    EXPECT_EQ(frames, 8000);
    return int64_t{0};
  });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(*got, WholeThenCut(flac, o, 16000, v1::Audio::START, 0));
  EXPECT_EQ((*got)[12000], 0.0f);  // past the stream: zeros
}

TEST(AudioDecodeWindowsTest, WindowsAtTimelineSecondsAreTheWholeDecodesSamples) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "Debian's ffmpeg is not installed: no test files can be made";
  // AAC in MP4: its first sample's time is not 0 (the encoder's priming).
  const std::string m4a = Noise(20, 44100, 2, "-c:a aac -b:a 96k", "a.m4a");
  for (int rate : {16000, 44100, 44056}) {
    AudioDecodeOptions o;
    o.rate = rate;
    o.channels = 2;
    absl::StatusOr<Waveform> whole = DecodeAudio(m4a, o);
    ASSERT_TRUE(whole.ok()) << whole.status();
    const int64_t window = rate / 2;
    // Windows from the start (the resampler starts with the stream) and
    // windows after it (the resampler starts a pre-roll before the first).
    for (const std::vector<double>& starts :
         {std::vector<double>{3.25, -0.2, 0.0, 12.5, 19.9, 40.0}, std::vector<double>{12.5, 3.25, 7.0}}) {
      absl::StatusOr<std::vector<float>> got = DecodeAudioWindows(m4a, o, starts, window);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), starts.size() * 2 * static_cast<size_t>(window));
      for (size_t k = 0; k < starts.size(); ++k) {
        const int64_t first = std::llround((starts[k] - whole->start_seconds) * rate);
        for (int c = 0; c < 2; ++c) {
          for (int64_t i = 0; i < window; ++i) {
            const int64_t at = first + i;
            const float want = at >= 0 && at < whole->frames ? whole->samples[c * whole->frames + at] : 0.0f;
            ASSERT_EQ((*got)[(k * 2 + c) * window + i], want) << "rate " << rate << " window " << k << " frame " << i;
          }
        }
      }
    }
  }
}

// The attack, shortened to 10 minutes: near-silent FLAC asked for at
// 384 kHz x 8 channels. Whole, that is 7 GB of floats; a 1 s window holds
// 12 MB.
TEST(AudioDecodeCropTest, AnUpsampledLongFileHoldsItsWindowNotItsLength) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "Debian's ffmpeg is not installed: no test files can be made";
  const std::string flac = Made("-f lavfi -i anoisesrc=d=600:r=16000:a=0.0001:s=1 -ac 1 -c:a flac", "long.flac");
  ASSERT_FALSE(flac.empty());
  AudioDecodeOptions o;
  o.rate = 384000;
  o.channels = 8;
  Rng rng(9);
  int64_t length = 0;
  absl::StatusOr<std::vector<float>> got;
  const int64_t growth = testing::PeakRssGrowth([&] {
    got = DecodeAudioCrop(flac, o, 384000, [&](int64_t frames) {
      length = frames;
      return rng.UniformInt(0, frames - 384000);
    });
  });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_LE(std::abs(length - int64_t{600} * 384000), 64) << length;
  EXPECT_EQ(got->size(), size_t{8} * 384000);
  if (growth < 0) GTEST_SKIP() << testing::PeakRssSkipReason();
  // The window is 12 MB (held twice while handed over); the 4 MiB whole try
  // and the decoder's frames add a few.
  EXPECT_LT(growth, int64_t{64} << 20) << "peak RSS grew by " << growth;
}

// Issue 49: media work past its wall-clock bound depends on the load, not on
// the file: a timer error (the batch fails as retryable), never a bad sample;
// a corrupt file stays a bad sample.
TEST(MediaStatusTest, AWallClockTimeoutIsATimerAndCorruptionIsTheSamples) {
  const absl::Status timeout = MediaStatus(STOKER_MEDIA_TIMEOUT, "decoding took longer than 60 s", "decoding audio");
  EXPECT_TRUE(IsTimerError(timeout)) << timeout;
  EXPECT_NE(timeout.message().find("decoding took longer than 60 s"), std::string::npos) << timeout;
  const absl::Status corrupt = MediaStatus(STOKER_MEDIA_CORRUPT, "bad packet", "decoding audio");
  EXPECT_FALSE(IsTimerError(corrupt));
  EXPECT_EQ(DecodeFailureOf(corrupt), DecodeFailure::kCorrupt);
}

}  // namespace
}  // namespace stoker
