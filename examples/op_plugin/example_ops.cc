// Example op plugin: three ops in the "example" namespace of the pipeline
// grammar, written with the header-only wrapper (stoker/op_plugin.hpp).
//   example.solarize(threshold=128)  every value >= threshold inverted (as the built-in solarize)
//   example.channel_shuffle()        the colour channels in a random order (draws from the sample's generator)
//   example.half()                   every other pixel of every other row: half the size
//   example.thumbnail(size=32)       nearest-neighbour resize to size x size: a fixed output size
//   example.append_text(field, text) appends text to a text field of the sample (e.g. a caption)
//   example.identity()               nothing: what a plugin call itself costs (tests/bench)
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include "stoker/op_plugin.hpp"

namespace {

using stoker::plugin::Args;
using stoker::plugin::Rng;
using stoker::plugin::Sample;

class Solarize {
 public:
  explicit Solarize(const Args& args) {
    const double threshold = args.Float("threshold", 128, 0, 256);
    for (int v = 0; v < 256; ++v) lut_[v] = static_cast<uint8_t>(v >= threshold ? 255 - v : v);
  }
  void Apply(Sample& sample, Rng&) const {
    const int n = sample.width() * 3;
    const uint8_t* lut = lut_.data();
    for (int y = 0; y < sample.height(); ++y) {
      uint8_t* p = sample.row(y);
      int x = 0;
      for (; x + 4 <= n; x += 4) {  // four independent look-ups per step
        const uint8_t a = lut[p[x]], b = lut[p[x + 1]], c = lut[p[x + 2]], d = lut[p[x + 3]];
        p[x] = a, p[x + 1] = b, p[x + 2] = c, p[x + 3] = d;
      }
      for (; x < n; ++x) p[x] = lut[p[x]];
    }
  }

 private:
  std::array<uint8_t, 256> lut_;
};

class ChannelShuffle {
 public:
  explicit ChannelShuffle(const Args&) {}
  void Apply(Sample& sample, Rng& rng) const {
    int order[3] = {0, 1, 2};
    for (int i = 2; i > 0; --i) std::swap(order[i], order[rng.Next() % static_cast<uint64_t>(i + 1)]);
    for (int y = 0; y < sample.height(); ++y) {
      uint8_t* p = sample.row(y);
      for (int x = 0; x < sample.width(); ++x, p += 3) {
        const uint8_t v[3] = {p[0], p[1], p[2]};
        for (int c = 0; c < 3; ++c) p[c] = v[order[c]];
      }
    }
  }
};

class Half {
 public:
  explicit Half(const Args&) {}
  int32_t OutputSize(int32_t*, int32_t*) const { return STOKER_SIZE_VARIES; }
  void Apply(Sample& sample, Rng&) const {
    const int h = std::max(1, sample.height() / 2), w = std::max(1, sample.width() / 2);
    const StokerImage in = sample.input();
    const StokerImage out = sample.Replace(h, w);
    for (int y = 0; y < h; ++y) {
      const uint8_t* src = in.data + int64_t{2 * y} * in.stride;
      uint8_t* dst = out.data + int64_t{y} * out.stride;
      for (int x = 0; x < w; ++x) std::memcpy(dst + 3 * x, src + 6 * x, 3);
    }
  }
};

class Thumbnail {
 public:
  explicit Thumbnail(const Args& args) : size_(static_cast<int>(args.Int("size", 32, 1, 8192))) {}
  int32_t OutputSize(int32_t* height, int32_t* width) const {
    *height = *width = size_;
    return STOKER_SIZE_FIXED;
  }
  void Apply(Sample& sample, Rng&) const {
    const StokerImage in = sample.input();
    const StokerImage out = sample.Replace(size_, size_);
    for (int y = 0; y < size_; ++y) {
      const uint8_t* src = in.data + int64_t{y} * in.height / size_ * in.stride;
      uint8_t* dst = out.data + int64_t{y} * out.stride;
      for (int x = 0; x < size_; ++x) std::memcpy(dst + 3 * x, src + 3 * (int64_t{x} * in.width / size_), 3);
    }
  }

 private:
  int size_;
};

class AppendText {
 public:
  explicit AppendText(const Args& args) : field_(args.String("field", "caption")), text_(args.String("text", "")) {}
  void Apply(Sample& sample, Rng&) const {
    std::string value(sample.FieldBytes(field_.c_str()));
    sample.SetField(field_.c_str(), value + text_);
  }

 private:
  std::string field_, text_;
};

class Identity {
 public:
  explicit Identity(const Args&) {}
  void Apply(Sample&, Rng&) const {}
};

const char* const kSolarizeParams[] = {"threshold", nullptr};
const char* const kThumbnailParams[] = {"size", nullptr};
const char* const kAppendParams[] = {"field", "text", nullptr};

}  // namespace

STOKER_OP_PLUGIN("example",
                 stoker::plugin::Op<Solarize>("example.solarize", "F.solarize: values >= threshold inverted",
                                              kSolarizeParams, false),
                 stoker::plugin::Op<ChannelShuffle>("example.channel_shuffle", "the RGB channels in a random order",
                                                    nullptr, true),
                 stoker::plugin::Op<Half>("example.half", "every other pixel of every other row", nullptr, false),
                 stoker::plugin::Op<Thumbnail>("example.thumbnail", "nearest-neighbour resize to size x size",
                                               kThumbnailParams, false),
                 stoker::plugin::Op<AppendText>("example.append_text", "text appended to a text field", kAppendParams,
                                                false),
                 stoker::plugin::Op<Identity>("example.identity", "nothing (a plugin call's own cost)", nullptr, false))
