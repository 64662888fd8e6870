#include "dataplane/decode/decoder_threads.h"

#include <algorithm>
#include <atomic>

namespace stoker {
namespace {

std::atomic<int> g_decoding{0};

}  // namespace

int SharedDecoderThreads(int budget, int decoding) {
  return std::clamp(std::max(1, budget) / std::max(1, decoding), 1, kMaxDecoderThreads);
}

DecoderThreadShare::DecoderThreadShare(int configured, int budget) {
  const int decoding = g_decoding.fetch_add(1, std::memory_order_relaxed) + 1;
  threads_ = configured > 0 ? std::min(configured, kMaxDecoderThreads) : SharedDecoderThreads(budget, decoding);
}

DecoderThreadShare::~DecoderThreadShare() { g_decoding.fetch_sub(1, std::memory_order_relaxed); }

int DecoderThreadShare::decoding() { return g_decoding.load(std::memory_order_relaxed); }

}  // namespace stoker
