#include "dataplane/ops/audio_ops.h"

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/decode/audio_decoder.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/sources/dataset.h"
#include "gtest/gtest.h"
#include "tests/testdata/ffmpeg_files.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;

void Put32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void Put16(std::string& s, uint16_t v) {
  s.push_back(static_cast<char>(v & 0xff));
  s.push_back(static_cast<char>(v >> 8));
}

// A 16-bit PCM WAV of interleaved `pcm` (frames x channels); `data_bytes`
// overrides the size the header states.
std::string Wav(const std::vector<int16_t>& pcm, int rate, int channels, int64_t data_bytes = -1) {
  std::string s = "RIFF";
  const uint32_t bytes = static_cast<uint32_t>(pcm.size() * 2);
  const uint32_t stated = data_bytes >= 0 ? static_cast<uint32_t>(data_bytes) : bytes;
  Put32(s, 36 + stated);
  s += "WAVEfmt ";
  Put32(s, 16);
  Put16(s, 1);
  Put16(s, static_cast<uint16_t>(channels));
  Put32(s, static_cast<uint32_t>(rate));
  Put32(s, static_cast<uint32_t>(rate * channels * 2));
  Put16(s, static_cast<uint16_t>(channels * 2));
  Put16(s, 16);
  s += "data";
  Put32(s, stated);
  for (int16_t v : pcm) Put16(s, static_cast<uint16_t>(v));
  return s;
}

std::vector<int16_t> Sine(int frames, int rate, double hz, double amplitude, int channels = 1) {
  std::vector<int16_t> pcm;
  for (int i = 0; i < frames; ++i) {
    for (int c = 0; c < channels; ++c) {
      const double v = amplitude * std::sin(2 * M_PI * hz * (c + 1) * i / rate);
      pcm.push_back(static_cast<int16_t>(std::lround(v * 32767)));
    }
  }
  return pcm;
}

double Rms(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double{x[i]} * x[i];
  return std::sqrt(s / static_cast<double>(n));
}

using ::stoker::testing::HaveFfmpeg;

// A file made by Debian's ffmpeg (tests/testdata/ffmpeg_files.h).
std::string Made(const std::string& args, const std::string& name) { return testing::MadeByFfmpeg(args, name); }

TEST(AudioDecoderTest, PcmAtItsOwnRateAndChannelsIsExact) {
  const std::vector<int16_t> pcm = Sine(8000, 8000, 440, 0.5, 2);
  AudioDecodeOptions o;
  o.rate = 8000;
  o.channels = 2;
  absl::StatusOr<Waveform> w = DecodeAudio(Wav(pcm, 8000, 2), o);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->frames, 8000);
  ASSERT_EQ(w->channels, 2);
  for (int i = 0; i < 8000; ++i) {
    for (int c = 0; c < 2; ++c) {
      ASSERT_EQ(w->samples[c * 8000 + i], pcm[2 * i + c] / 32768.0f) << i << " " << c;
    }
  }
}

TEST(AudioDecoderTest, StereoMixesDownToTheMeanOfItsChannels) {
  const std::vector<int16_t> pcm = Sine(4000, 8000, 300, 0.4, 2);
  AudioDecodeOptions o;
  o.rate = 8000;
  absl::StatusOr<Waveform> w = DecodeAudio(Wav(pcm, 8000, 2), o);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->frames, 4000);
  for (int i = 0; i < 4000; ++i) {
    const float mean = (pcm[2 * i] / 32768.0f + pcm[2 * i + 1] / 32768.0f) / 2;
    ASSERT_NEAR(w->samples[i], mean, 1e-6) << i;
  }
}

TEST(AudioDecoderTest, ResamplingKeepsLengthPitchAndLevel) {
  const int in_rate = 44100, out_rate = 16000;
  const std::vector<int16_t> pcm = Sine(in_rate * 2, in_rate, 1000, 0.5);
  AudioDecodeOptions o;
  o.rate = out_rate;
  absl::StatusOr<Waveform> w = DecodeAudio(Wav(pcm, in_rate, 1), o);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_NEAR(w->frames, 2 * out_rate, 2);
  // Away from the edges: the level of a 0.5 sine, and 1000 Hz (zero crossings).
  const float* mid = w->samples.data() + out_rate / 2;
  EXPECT_NEAR(Rms(mid, out_rate), 0.5 / std::sqrt(2.0), 0.005);
  int crossings = 0;
  for (int i = 1; i < out_rate; ++i) crossings += (mid[i - 1] < 0) != (mid[i] < 0);
  EXPECT_NEAR(crossings, 2000, 2);
}

TEST(AudioDecoderTest, EveryCodecOfTheIssueDecodes) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "Debian's ffmpeg tool is not installed (deploy/install-deps.sh installs it)";
  const std::string tone = "-f lavfi -i sine=frequency=440:sample_rate=48000:duration=1.5";
  struct Case {
    const char* name;
    std::string args;
  };
  const std::vector<Case> cases = {
      {"a.flac", tone},
      {"a.mp3", tone + " -c:a libmp3lame -b:a 128k"},
      {"a.opus", tone + " -c:a libopus"},
      {"a.ogg", tone + " -c:a libvorbis"},
      {"a.m4a", tone + " -c:a aac"},
      {"a.wav", tone + " -ac 2"},
  };
  for (const Case& c : cases) {
    const std::string bytes = Made(c.args, c.name);
    ASSERT_FALSE(bytes.empty()) << c.name;
    AudioDecodeOptions o;
    absl::StatusOr<Waveform> w = DecodeAudio(bytes, o);
    ASSERT_TRUE(w.ok()) << c.name << ": " << w.status();
    // Encoders add priming and padding of up to a frame or two.
    EXPECT_NEAR(static_cast<double>(w->frames) / 16000, 1.5, 0.1) << c.name;
    // lavfi's sine is at 1/8 of full scale: RMS 0.125 / sqrt(2); ffmpeg's
    // -ac 2 puts it at -3 dB in each channel, and their mean is that.
    const double level = c.args.find("-ac 2") != std::string::npos ? std::sqrt(0.5) : 1.0;
    EXPECT_NEAR(Rms(w->samples.data() + 4000, 16000), level * 0.125 / std::sqrt(2.0), 0.01) << c.name;
  }
}

TEST(AudioDecoderTest, EachKindOfBadInputFailsWithItsReason) {
  AudioDecodeOptions o;
  auto reason = [&](const std::string& bytes) {
    absl::StatusOr<Waveform> w = DecodeAudio(bytes, o);
    EXPECT_FALSE(w.ok());
    return w.ok() ? std::string("ok") : std::string(DecodeFailureName(DecodeFailureOf(w.status())));
  };
  EXPECT_EQ(reason(""), "empty");
  std::mt19937 rng(3);
  std::string noise(5000, '\0');
  for (char& ch : noise) ch = static_cast<char>(rng());
  EXPECT_EQ(reason(noise), "corrupt");
  const std::string wav = Wav(Sine(16000, 16000, 440, 0.5), 16000, 1);
  EXPECT_EQ(reason(wav.substr(0, wav.size() / 2)), "truncated");
  if (HaveFfmpeg()) {  // FLAC states its length in STREAMINFO
    const std::string flac = Made("-f lavfi -i sine=frequency=440:duration=2", "t.flac");
    EXPECT_EQ(reason(flac.substr(0, flac.size() / 2)), "truncated");
  }
  EXPECT_EQ(reason(wav.substr(0, 30)), "corrupt");  // the header itself cut
  // A LIST chunk stating 4 GiB in a small file (found by media_decode_fuzz:
  // FFmpeg allocated its tags by the stated sizes, 1.4 GB).
  std::string list = wav.substr(0, 36) + "LIST";
  Put32(list, 0xffffffffu);
  list += "INFOISFT" + wav.substr(36);
  absl::StatusOr<Waveform> listed = DecodeAudio(list, o);
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(DecodeFailureOf(listed.status()), DecodeFailure::kCorrupt);
  EXPECT_NE(listed.status().message().find("LIST chunk states 4294967295 bytes"), std::string::npos) << listed.status();
  // 500 Hz is no real audio, and upsampling it 32x from a few bytes is huge.
  EXPECT_EQ(reason(Wav(Sine(500, 500, 50, 0.5), 500, 1)), "corrupt");
  // A header announcing about 18 hours (0x7fffffff bytes at 16 kHz mono).
  EXPECT_EQ(reason(Wav(Sine(160, 16000, 440, 0.5), 16000, 1, 0x7ffffff0)), "too_large");
  // Two seconds decoded where one is the limit.
  o.max_seconds = 1;
  // Two seconds behind a header that states no length (streamed WAV).
  EXPECT_EQ(reason(Wav(Sine(32000, 16000, 440, 0.5), 16000, 1, 0)), "too_large");
  absl::StatusOr<Waveform> w = DecodeAudio(Wav(Sine(32000, 16000, 440, 0.5), 16000, 1), o);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("--max-media-seconds"), std::string::npos) << w.status();
  o.max_seconds = 3600;
  if (HaveFfmpeg()) {  // a video with no audio stream
    const std::string video = Made("-f lavfi -i testsrc=size=64x48:rate=10:duration=1 -c:v mpeg4", "v.mkv");
    absl::StatusOr<Waveform> v = DecodeAudio(video, o);
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(DecodeFailureOf(v.status()), DecodeFailure::kUnsupported) << v.status();
    EXPECT_NE(v.status().message().find("no audio stream"), std::string::npos) << v.status();
  }
}

TEST(AudioWindowTest, CropsAndPads) {
  std::vector<float> x(2 * 10);
  for (int i = 0; i < 20; ++i) x[i] = static_cast<float>(i);
  Rng rng(1);
  std::vector<float> out(2 * 4);
  AudioWindow(x.data(), 2, 10, 4, v1::Audio::START, rng, out.data());
  EXPECT_EQ(out, (std::vector<float>{0, 1, 2, 3, 10, 11, 12, 13}));
  AudioWindow(x.data(), 2, 10, 4, v1::Audio::CENTER, rng, out.data());
  EXPECT_EQ(out, (std::vector<float>{3, 4, 5, 6, 13, 14, 15, 16}));
  std::vector<int> starts(7, 0);
  for (int i = 0; i < 700; ++i) {
    AudioWindow(x.data(), 2, 10, 4, v1::Audio::RANDOM, rng, out.data());
    ASSERT_EQ(out[4], out[0] + 10);  // one start for every channel
    ++starts[static_cast<int>(out[0])];
  }
  for (int s = 0; s <= 6; ++s) EXPECT_GT(starts[s], 60) << s;  // every start drawn
  std::vector<float> padded(2 * 13);
  AudioWindow(x.data(), 2, 10, 13, v1::Audio::RANDOM, rng, padded.data());
  EXPECT_EQ(padded[9], 9);
  EXPECT_EQ(padded[10], 0);
  EXPECT_EQ(padded[12], 0);
  EXPECT_EQ(padded[13], 10);
}

// torchaudio's MelSpectrogram, written out in double with a naive DFT.
std::vector<double> ReferenceMel(const std::vector<float>& x, int rate, int n_fft, int hop, int n_mels, double f_min,
                                 double f_max, bool log) {
  const int n = static_cast<int>(x.size()), pad = n_fft / 2, n_freqs = n_fft / 2 + 1;
  const int frames = 1 + (n + 2 * pad - n_fft) / hop;
  auto mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  auto hz = [](double m) { return 700 * (std::pow(10, m / 2595) - 1); };
  std::vector<double> pts(n_mels + 2);
  for (int i = 0; i < n_mels + 2; ++i) pts[i] = hz(mel(f_min) + (mel(f_max) - mel(f_min)) * i / (n_mels + 1));
  std::vector<double> out(static_cast<size_t>(n_mels) * frames, 0);
  for (int t = 0; t < frames; ++t) {
    std::vector<double> frame(n_fft);
    for (int i = 0; i < n_fft; ++i) {
      int j = t * hop - pad + i;
      if (j < 0) j = -j;
      if (j >= n) j = 2 * (n - 1) - j;
      frame[i] = x[j] * (0.5 - 0.5 * std::cos(2 * M_PI * i / n_fft));
    }
    for (int k = 0; k < n_freqs; ++k) {
      std::complex<double> s = 0;
      for (int i = 0; i < n_fft; ++i) s += frame[i] * std::polar(1.0, -2 * M_PI * k * i / n_fft);
      const double power = std::norm(s);
      const double f = static_cast<double>(rate / 2) * k / (n_freqs - 1);
      for (int m = 0; m < n_mels; ++m) {
        const double w =
            std::max(0.0, std::min((f - pts[m]) / (pts[m + 1] - pts[m]), (pts[m + 2] - f) / (pts[m + 2] - pts[m + 1])));
        out[static_cast<size_t>(m) * frames + t] += w * power;
      }
    }
  }
  if (log) {
    for (double& v : out) v = 10 * std::log10(std::max(v, 1e-10));
  }
  return out;
}

TEST(MelSpectrogramTest, EqualsTheDefinitionComputedInDouble) {
  std::mt19937 rng(5);
  std::normal_distribution<float> noise(0, 0.1f);
  std::vector<float> x(4000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.3f * std::sin(0.05f * i) + noise(rng);
  for (const bool log : {false, true}) {
    for (const int n_fft : {400, 255}) {
      v1::MelSpectrogram op;
      op.set_n_fft(n_fft);
      op.set_hop(160);
      op.set_n_mels(40);
      op.set_f_min(20);
      op.set_log(log);
      ASSERT_TRUE(MelSpectrogram::Check("m", 16000, op).ok());
      EXPECT_EQ(op.f_max(), 8000);
      MelSpectrogram mel(op, 16000);
      const int64_t frames = mel.Frames(4000);
      std::vector<float> out(static_cast<size_t>(40 * frames));
      mel.Compute(x.data(), 4000, out.data());
      const std::vector<double> ref = ReferenceMel(x, 16000, n_fft, 160, 40, 20, 8000, log);
      ASSERT_EQ(ref.size(), out.size());
      for (size_t i = 0; i < ref.size(); ++i) {
        if (log) {
          ASSERT_NEAR(out[i], ref[i], 1e-3 * std::max(1.0, std::abs(ref[i]))) << i;
        } else {
          ASSERT_NEAR(out[i], ref[i], 1e-3 * ref[i] + 1e-6) << i;
        }
      }
    }
  }
}

TEST(MelSpectrogramTest, ChecksItsParameters) {
  v1::MelSpectrogram op;
  ASSERT_TRUE(MelSpectrogram::Check("p[1]", 16000, op).ok());
  EXPECT_EQ(op.n_fft(), 400);
  EXPECT_EQ(op.hop(), 200);
  EXPECT_EQ(op.n_mels(), 128);
  EXPECT_TRUE(op.log());
  v1::MelSpectrogram bad;
  bad.set_f_max(9000);
  absl::Status s = MelSpectrogram::Check("p[1]", 16000, bad);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("p[1].mel_spectrogram.f_max"), std::string::npos) << s;
  bad = v1::MelSpectrogram();
  bad.set_n_mels(500);
  EXPECT_NE(MelSpectrogram::Check("p[1]", 16000, bad).message().find("n_mels = 500"), std::string::npos);
}

v1::SessionConfig Session(const std::string& pipeline) {
  v1::SessionConfig c;
  c.set_batch_size(4);
  absl::StatusOr<std::vector<v1::Op>> ops = ParsePipelineText(pipeline);
  EXPECT_TRUE(ops.ok()) << ops.status();
  if (ops.ok()) {
    for (v1::Op& op : *ops) *c.add_pipeline() = op;
  }
  return c;
}

TEST(AudioPipelineTest, ShapesFromTheTextForm) {
  absl::StatusOr<Pipeline> p = Pipeline::Create(Session("audio(rate=8000, channels=2, seconds=1.5, crop=center)"));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_NE(p->audio(), nullptr);
  EXPECT_EQ(p->SampleShape(), (std::vector<int64_t>{2, 12000}));
  EXPECT_EQ(p->sample_bytes(), 2 * 12000 * 4);
  EXPECT_EQ(p->dtype(), v1::FLOAT32);
  EXPECT_EQ(p->layout(), v1::AUDIO);
  EXPECT_EQ(PipelineToText(p->ops()), "audio(rate=8000, channels=2, seconds=1.5, crop=center)");
  p = Pipeline::Create(Session("audio(seconds=1), mel_spectrogram(n_mels=64, hop=160)"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->SampleShape(), (std::vector<int64_t>{1, 64, 101}));
}

TEST(AudioPipelineTest, RefusesWhatDoesNotApplyToAudio) {
  auto error = [](const std::string& text) {
    absl::StatusOr<Pipeline> p = Pipeline::Create(Session(text));
    EXPECT_FALSE(p.ok()) << text;
    return p.ok() ? std::string() : std::string(p.status().message());
  };
  EXPECT_NE(error("audio(), center_crop(224)").find("pipeline[1]"), std::string::npos);
  EXPECT_NE(error("mel_spectrogram()").find("starts with audio"), std::string::npos);
  EXPECT_NE(error("audio(rate=100)").find("pipeline[0].audio.rate = 100"), std::string::npos);
  EXPECT_NE(error("audio(channels=9)").find("channels = 9"), std::string::npos);
  EXPECT_NE(error("audio(seconds=0.01), mel_spectrogram(n_fft=400)").find("longer than n_fft / 2"), std::string::npos);
  EXPECT_NE(error("audio(), mel_spectrogram(), mel_spectrogram()").find("at most one"), std::string::npos);
  // The spectrogram's work is bounded: 9.6 M frames of n_fft 16384.
  EXPECT_NE(error("audio(seconds=600), mel_spectrogram(n_fft=16384, hop=1)").find("bytes of work"), std::string::npos);
  v1::SessionConfig c = Session("center_crop(8)");
  c.set_layout(v1::AUDIO);
  EXPECT_FALSE(Pipeline::Create(c).ok());
  c = Session("audio()");
  c.set_cache_mode(v1::CACHE_DECODED);
  EXPECT_NE(Pipeline::Create(c).status().message().find("CACHE_DECODED"), std::string::npos);
  std::vector<v1::Op> prefix(1);
  prefix[0].mutable_audio();
  EXPECT_FALSE(Pipeline::CreatePrefix(prefix).ok());
}

TEST(AudioPipelineTest, ProducesTheWindowOfTheDecodedStream) {
  absl::StatusOr<Pipeline> p = Pipeline::Create(Session("audio(rate=8000, seconds=0.5, crop=random)"));
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<int16_t> pcm = Sine(8000, 8000, 440, 0.5);
  const std::string wav = Wav(pcm, 8000, 1);
  std::vector<float> a(4000), b(4000);
  SampleTimes times;
  Rng r1 = Rng::ForSample(7, 0, 3), r2 = Rng::ForSample(7, 0, 3);
  ASSERT_TRUE(p->ProduceAudio(wav, r1, 10, reinterpret_cast<uint8_t*>(a.data()), &times).ok());
  ASSERT_TRUE(p->ProduceAudio(wav, r2, 10, reinterpret_cast<uint8_t*>(b.data()), &times).ok());
  EXPECT_EQ(a, b);  // deterministic per (seed, epoch, sample)
  // The window is a run of the file's samples.
  int start = -1;
  for (int s = 0; s + 4000 <= 8000 && start < 0; ++s) {
    if (pcm[s] / 32768.0f == a[0] && pcm[s + 1] / 32768.0f == a[1] && pcm[s + 2] / 32768.0f == a[2]) start = s;
  }
  ASSERT_GE(start, 0);
  for (int i = 0; i < 4000; ++i) ASSERT_EQ(a[i], pcm[start + i] / 32768.0f) << i;
  EXPECT_GT(times.decode, absl::ZeroDuration());
  // Over the limit: too_large naming the flag.
  absl::Status s = p->ProduceAudio(wav, r1, 0.5, reinterpret_cast<uint8_t*>(a.data()), &times);
  EXPECT_EQ(DecodeFailureOf(s), DecodeFailure::kTooLarge) << s;
}

TEST(AudioPipelineTest, Int16WaveformsAreTheFloatOnesConvertedAsFfmpegDoes) {
  const float in[] = {
      0.0f, 1.0f, -1.0f, 1.5f, -2.0f, 0.5f / 32768, 1.5f / 32768, -0.5f / 32768, 1000.0f / 32768, 32767.4f / 32768};
  int16_t out[10];
  FloatToInt16(in, 10, out);
  // round(x * 32768) (half to even, as lrintf), clamped.
  EXPECT_EQ(std::vector<int16_t>(out, out + 10),
            (std::vector<int16_t>{0, 32767, -32768, 32767, -32768, 0, 2, 0, 1000, 32767}));
  absl::StatusOr<Pipeline> f = Pipeline::Create(Session("audio(rate=8000, seconds=0.5, crop=random)"));
  absl::StatusOr<Pipeline> i = Pipeline::Create(Session("audio(rate=8000, seconds=0.5, crop=random, format=int16)"));
  ASSERT_TRUE(f.ok() && i.ok()) << i.status();
  EXPECT_EQ(i->dtype(), v1::INT16);
  EXPECT_EQ(i->sample_bytes(), 4000 * 2);
  EXPECT_EQ(i->SampleShape(), f->SampleShape());
  EXPECT_EQ(PipelineToText(i->ops()), "audio(rate=8000, channels=1, seconds=0.5, format=int16)");
  const std::string wav = Wav(Sine(8000, 8000, 440, 0.7), 8000, 1);
  std::vector<float> a(4000);
  std::vector<int16_t> b(4000), want(4000);
  SampleTimes times;
  Rng r1 = Rng::ForSample(7, 0, 3), r2 = Rng::ForSample(7, 0, 3);
  ASSERT_TRUE(f->ProduceAudio(wav, r1, 10, reinterpret_cast<uint8_t*>(a.data()), &times).ok());
  ASSERT_TRUE(i->ProduceAudio(wav, r2, 10, reinterpret_cast<uint8_t*>(b.data()), &times).ok());
  FloatToInt16(a.data(), 4000, want.data());
  EXPECT_EQ(b, want);  // the same window, converted
  EXPECT_GT(*std::max_element(b.begin(), b.end()), 20000);
  // A spectrogram is float32 only; images are never int16.
  EXPECT_NE(Pipeline::Create(Session("audio(format=int16), mel_spectrogram()"))
                .status()
                .message()
                .find("a mel spectrogram is float32"),
            std::string::npos);
  v1::SessionConfig c = Session("center_crop(8)");
  c.set_dtype(v1::INT16);
  EXPECT_NE(Pipeline::Create(c).status().message().find("INT16"), std::string::npos);
}

TEST(AudioDatasetTest, ATreeOfAudioFilesIsAnAudioSource) {
  const fs::path root = fs::temp_directory_path() / absl::StrCat("stoker_audio_tree_", getpid());
  fs::remove_all(root);
  for (const char* cls : {"dog", "cat"}) {
    fs::create_directories(root / "clips" / cls);
    for (int i = 0; i < 2; ++i) {
      std::ofstream(root / "clips" / cls / absl::StrCat(i, ".wav"), std::ios::binary)
          << Wav(Sine(800, 8000, 440, 0.5), 8000, 1);
    }
    std::ofstream(root / "clips" / cls / "notes.txt") << "not a sample";
  }
  DatasetCatalog catalog(root);
  SourceOrError source = catalog.Open("clips");
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->media(), MediaKind::kAudio);
  EXPECT_EQ((*source)->size(), 4);
  EXPECT_EQ((*source)->class_names(), (std::vector<std::string>{"cat", "dog"}));
  fs::create_directories(root / "empty" / "a");
  std::ofstream(root / "empty" / "a" / "x.txt") << "x";
  SourceOrError none = catalog.Open("empty");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no images, audio or video files"), std::string::npos) << none.status();
  fs::remove_all(root);
}

}  // namespace
}  // namespace stoker
