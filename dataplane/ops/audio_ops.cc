#include "dataplane/ops/audio_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <opencv2/core.hpp>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "dataplane/decode/audio_decoder.h"
#include "dataplane/decode/media_loader.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline.h"

namespace stoker {
namespace {

constexpr int64_t kMaxSpectrogramBytes = int64_t{256} << 20;

double HzToMel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double MelToHz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

}  // namespace

absl::Status CheckAudio(const std::string& where, v1::Audio& a) { return CheckOpBody(v1::Op::kAudio, where, a); }

absl::Status CheckAudioRules(const std::string& where, const v1::Audio& a) {
  const bool rate_in_range = a.rate() >= kMinAudioRate && a.rate() <= kMaxAudioRate;  // else its range refuses it
  if (!(a.seconds() > 0 && a.seconds() <= kMaxAudioSeconds) ||
      (rate_in_range && std::llround(double{a.seconds()} * a.rate()) < 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s.audio.seconds = %g; allowed range is (0, %g] and at least one sample", where, a.seconds(),
                        kMaxAudioSeconds));
  }
  if (!v1::Audio::Crop_IsValid(a.crop()) || !v1::Audio::Pad_IsValid(a.pad())) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".audio: crop is random, center or start; pad is zero"));
  }
  return absl::OkStatus();
}

bool IsAudioPipeline(const google::protobuf::RepeatedPtrField<v1::Op>& ops) {
  return std::any_of(ops.begin(), ops.end(),
                     [](const v1::Op& op) { return op.has_audio() || op.has_mel_spectrogram(); });
}

int64_t AudioWindowStart(int64_t frames, int64_t window, v1::Audio::Crop crop, Rng& rng) {
  if (frames <= window) return 0;
  if (crop == v1::Audio::RANDOM) return rng.UniformInt(0, frames - window);
  if (crop == v1::Audio::CENTER) return (frames - window) / 2;
  return 0;
}

void AudioWindow(const float* samples, int channels, int64_t frames, int64_t window, v1::Audio::Crop crop, Rng& rng,
                 float* out) {
  const int64_t start = AudioWindowStart(frames, window, crop, rng);
  const int64_t n = std::min(window, frames - start);
  for (int c = 0; c < channels; ++c) {
    float* dst = out + static_cast<int64_t>(c) * window;
    std::memcpy(dst, samples + static_cast<int64_t>(c) * frames + start, static_cast<size_t>(n) * sizeof(float));
    std::fill(dst + n, dst + window, 0.0f);
  }
}

absl::Status MelSpectrogram::Check(const std::string& where, int rate, v1::MelSpectrogram& op) {
  if (op.n_fft() == 0) op.set_n_fft(kDefaultFft);
  if (op.n_fft() < kMinFft || op.n_fft() > kMaxFft) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".mel_spectrogram.n_fft = ", op.n_fft(), "; allowed range is ", kMinFft, "..", kMaxFft));
  }
  if (op.hop() == 0) op.set_hop(op.n_fft() / 2);
  if (op.hop() < 1 || op.hop() > op.n_fft()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".mel_spectrogram.hop = ", op.hop(), "; allowed range is 1..n_fft (", op.n_fft(), ")"));
  }
  const int n_freqs = op.n_fft() / 2 + 1;
  if (op.n_mels() == 0) op.set_n_mels(128);
  if (op.n_mels() < 1 || op.n_mels() > n_freqs) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".mel_spectrogram.n_mels = ", op.n_mels(),
                                                   "; allowed range is 1..n_fft / 2 + 1 (", n_freqs, ")"));
  }
  const float nyquist = static_cast<float>(rate / 2);
  if (op.f_max() == 0) op.set_f_max(nyquist);
  if (!(op.f_max() > 0 && op.f_max() <= nyquist)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.mel_spectrogram.f_max = %g Hz; allowed range is (0, %g] (half the rate)", where, op.f_max(), nyquist));
  }
  if (!(op.f_min() >= 0 && op.f_min() < op.f_max())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.mel_spectrogram.f_min = %g Hz; allowed range is [0, f_max) ([0, %g))", where, op.f_min(), op.f_max()));
  }
  if (!op.has_log()) op.set_log(true);
  return absl::OkStatus();
}

MelSpectrogram::MelSpectrogram(const v1::MelSpectrogram& op, int rate)
    : n_fft_(op.n_fft()), hop_(op.hop()), n_mels_(op.n_mels()), n_freqs_(op.n_fft() / 2 + 1), log_(op.log()) {
  window_.resize(static_cast<size_t>(n_fft_));
  for (int i = 0; i < n_fft_; ++i) {
    window_[i] = static_cast<float>(0.5 - 0.5 * std::cos(2.0 * M_PI * i / n_fft_));  // periodic
  }
  // Triangles between n_mels + 2 points evenly spaced in HTK mel from f_min
  // to f_max, over n_freqs bins evenly spaced from 0 to rate / 2.
  const double m_min = HzToMel(op.f_min()), m_max = HzToMel(op.f_max());
  std::vector<double> f_pts(static_cast<size_t>(n_mels_) + 2);
  for (int i = 0; i < n_mels_ + 2; ++i) f_pts[i] = MelToHz(m_min + (m_max - m_min) * i / (n_mels_ + 1));
  filters_.assign(static_cast<size_t>(n_freqs_) * n_mels_, 0.0f);
  const double top = static_cast<double>(rate / 2);
  for (int f = 0; f < n_freqs_; ++f) {
    const double hz = n_freqs_ > 1 ? top * f / (n_freqs_ - 1) : 0;
    for (int m = 0; m < n_mels_; ++m) {
      const double down = (hz - f_pts[m]) / (f_pts[m + 1] - f_pts[m]);
      const double up = (f_pts[m + 2] - hz) / (f_pts[m + 2] - f_pts[m + 1]);
      filters_[static_cast<size_t>(f) * n_mels_ + m] = static_cast<float>(std::max(0.0, std::min(down, up)));
    }
  }
}

void MelSpectrogram::Compute(const float* x, int64_t n, float* out) const {
  const int pad = n_fft_ / 2;
  const int64_t frames = 1 + (n + 2 * pad - n_fft_) / hop_;
  // Reflect padding (torch's "reflect": the edge sample is not repeated).
  auto at = [&](int64_t i) {
    if (n == 1) return x[0];
    while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
    return x[i];
  };
  cv::Mat windowed(static_cast<int>(frames), n_fft_, CV_32F);
  for (int64_t t = 0; t < frames; ++t) {
    float* row = windowed.ptr<float>(static_cast<int>(t));
    const int64_t begin = t * hop_ - pad;
    for (int i = 0; i < n_fft_; ++i) row[i] = at(begin + i) * window_[i];
  }
  cv::Mat spectrum;
  cv::dft(windowed, spectrum, cv::DFT_ROWS);  // CCS-packed real spectrum per row
  cv::Mat power(static_cast<int>(frames), n_freqs_, CV_32F);
  for (int64_t t = 0; t < frames; ++t) {
    const float* s = spectrum.ptr<float>(static_cast<int>(t));
    float* p = power.ptr<float>(static_cast<int>(t));
    p[0] = s[0] * s[0];
    for (int k = 1; k < n_freqs_; ++k) {
      if (2 * k == n_fft_) {
        p[k] = s[n_fft_ - 1] * s[n_fft_ - 1];  // Nyquist: real only
      } else {
        const float re = s[2 * k - 1], im = s[2 * k];
        p[k] = re * re + im * im;
      }
    }
  }
  const cv::Mat filters(n_freqs_, n_mels_, CV_32F, const_cast<float*>(filters_.data()));
  cv::Mat mel = power * filters;  // frames x n_mels
  for (int m = 0; m < n_mels_; ++m) {
    float* row = out + static_cast<int64_t>(m) * frames;
    for (int64_t t = 0; t < frames; ++t) {
      const float v = mel.at<float>(static_cast<int>(t), m);
      row[t] = log_ ? 10.0f * std::log10(std::max(v, 1e-10f)) : v;
    }
  }
}

absl::StatusOr<AudioPipeline> AudioPipeline::Create(std::vector<v1::Op>* ops, int batch_size) {
  if (ops->empty() || !(*ops)[0].has_audio()) {
    return absl::InvalidArgumentError(
        "an audio pipeline starts with audio(rate, channels, seconds, crop, pad): pipeline[0] decodes the sample's "
        "audio stream");
  }
  AudioPipeline p;
  if (auto s = CheckAudio("pipeline[0]", *(*ops)[0].mutable_audio()); !s.ok()) return s;
  std::string why;
  if (LoadMediaModule(&why) == nullptr) return absl::FailedPreconditionError(why);
  p.audio_ = (*ops)[0].audio();
  p.window_ = std::llround(double{p.audio_.seconds()} * p.audio_.rate());
  for (size_t i = 1; i < ops->size(); ++i) {
    const std::string where = absl::StrCat("pipeline[", i, "]");
    v1::Op& op = (*ops)[i];
    if (!op.has_mel_spectrogram() || p.mel_) {
      return absl::InvalidArgumentError(absl::StrCat(
          where,
          ": after audio(...) an audio pipeline has at most one mel_spectrogram(...); image ops do not apply "
          "to audio"));
    }
    if (auto s = MelSpectrogram::Check(where, p.audio_.rate(), *op.mutable_mel_spectrogram()); !s.ok()) return s;
    if (p.window_ <= op.mel_spectrogram().n_fft() / 2) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".mel_spectrogram.n_fft = ", op.mel_spectrogram().n_fft(),
                                                     ": the window of ", p.window_,
                                                     " samples must be longer than n_fft / 2 (its reflect padding)"));
    }
    // The frames' windowed copies (frames x n_fft floats) are the work.
    const int64_t work = (1 + p.window_ / op.mel_spectrogram().hop()) * int64_t{op.mel_spectrogram().n_fft()} * 4;
    if (work > kMaxSpectrogramBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".mel_spectrogram: ", 1 + p.window_ / op.mel_spectrogram().hop(), " frames of n_fft ",
                       op.mel_spectrogram().n_fft(), " are ", work, " bytes of work per sample; at most ",
                       kMaxSpectrogramBytes, " (a larger hop or a shorter window)"));
    }
    if (p.audio_.format() == v1::Audio::INT16) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": a mel spectrogram is float32; audio(format=int16) is for waveforms (drop format=int16)"));
    }
    p.mel_ = true;
    p.spectrogram_.emplace_back(op.mel_spectrogram(), p.audio_.rate());
  }
  if (batch_size * p.sample_bytes() > kMaxBatchBytes) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size x sample bytes = ", batch_size, " x ", p.sample_bytes(),
                                                   " bytes; a batch may hold at most ", kMaxBatchBytes, " bytes"));
  }
  return p;
}

std::vector<int64_t> AudioPipeline::SampleShape() const {
  if (mel_) return {audio_.channels(), spectrogram_[0].n_mels(), spectrogram_[0].Frames(window_)};
  return {audio_.channels(), window_};
}

int64_t AudioPipeline::sample_bytes() const {
  int64_t n = 1;
  for (int64_t d : SampleShape()) n *= d;
  return n * (int16() ? int64_t{2} : int64_t{4});
}

void FloatToInt16(const float* in, int64_t n, int16_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<int16_t>(std::clamp(std::lrint(in[i] * 32768.0f), -32768L, 32767L));
  }
}

absl::Status AudioPipeline::Produce(absl::string_view encoded, Rng& rng, double max_seconds, uint8_t* dst,
                                    SampleTimes* times) const {
  const absl::Time t0 = absl::Now();
  AudioDecodeOptions options;
  options.rate = audio_.rate();
  options.channels = audio_.channels();
  if (max_seconds > 0) options.max_seconds = max_seconds;
  auto choose = [&](int64_t frames) { return AudioWindowStart(frames, window_, audio_.crop(), rng); };
  absl::StatusOr<std::vector<float>> window = DecodeAudioCrop(encoded, options, window_, choose);
  const absl::Time t1 = absl::Now();
  times->decode += t1 - t0;
  if (!window.ok()) return window.status();
  const int channels = audio_.channels();
  if (!mel_ && !int16()) {
    std::copy(window->begin(), window->end(), reinterpret_cast<float*>(dst));
  } else if (!mel_) {
    FloatToInt16(window->data(), channels * window_, reinterpret_cast<int16_t*>(dst));
  } else {
    const MelSpectrogram& mel = spectrogram_[0];
    const int64_t per_channel = static_cast<int64_t>(mel.n_mels()) * mel.Frames(window_);
    for (int c = 0; c < channels; ++c) {
      mel.Compute(window->data() + c * window_, window_, reinterpret_cast<float*>(dst) + c * per_channel);
    }
  }
  times->augment += absl::Now() - t1;
  return absl::OkStatus();
}

}  // namespace stoker
