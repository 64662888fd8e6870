// Image decoding (every format), the fused crop and the pipeline's Store
// (reviews 1.8, 1.11): the first bytes choose a region, a scale and a
// pipeline; the rest is the file.
#include <cstdint>
#include <string>
#include <vector>

#include "common/rng.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/ops/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint8_t mode = data[0], a = data[1], b = data[2], c = data[3];
  const absl::string_view bytes(reinterpret_cast<const char*>(data + 4), size - 4);
  constexpr int64_t kMaxPixels = 4'000'000;
  auto info = stoker::ProbeImage(bytes);
  if (info.ok() && int64_t{info->width} * info->height <= kMaxPixels) {
    stoker::CropBox box;
    if (mode & 1) box = {a % (info->height + 1), b % (info->width + 1), 1 + c % info->height, 1 + a % info->width};
    auto decoded = stoker::DecodeImage(bytes, box, 1 + (mode >> 1) % 8, kMaxPixels);
    if (decoded.ok() && decoded->type() != CV_8UC3) __builtin_trap();
  }
  static const auto* pipelines = [] {
    auto* p = new std::vector<stoker::Pipeline>();
    for (int k = 0; k < 4; ++k) {
      stoker::v1::SessionConfig config;
      config.set_dataset("fuzz");
      config.set_batch_size(1);
      if (k == 0) config.add_pipeline()->mutable_center_crop()->set_size(16);
      if (k == 1) config.add_pipeline()->mutable_random_resized_crop()->set_size(24);
      if (k == 2) {
        config.add_pipeline()->mutable_resize()->set_shorter_side(20);
        config.add_pipeline()->mutable_center_crop()->set_size(20);
        config.set_dtype(stoker::v1::FLOAT16);
      }
      if (k == 3) {
        config.add_pipeline()->mutable_center_crop()->set_size(8);
        config.set_layout(stoker::v1::NCHW);
        config.set_dtype(stoker::v1::FLOAT32);
      }
      auto made = stoker::Pipeline::Create(config);
      if (!made.ok()) __builtin_trap();
      p->push_back(*std::move(made));
    }
    return p;
  }();
  const stoker::Pipeline& p = (*pipelines)[mode % pipelines->size()];
  std::vector<uint8_t> out(static_cast<size_t>(p.sample_bytes()));
  stoker::Rng rng = stoker::Rng::ForSample(a, b, c);
  stoker::SampleTimes times;
  try {
    (void)p.Produce(bytes, rng, kMaxPixels, out.data(), &times);
  } catch (const std::exception&) {
    // The server catches these around Produce (batch_session.cc); what
    // matters here is memory safety.
  }
  return 0;
}
