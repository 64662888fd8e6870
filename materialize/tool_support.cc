#include "materialize/tool_support.h"

#include <signal.h>

#include <iostream>

#include "glog/logging.h"

namespace stoker {
namespace {

std::atomic<bool> g_cancel{false};

void OnSignal(int) { g_cancel.store(true); }

}  // namespace

const std::atomic<bool>* CancelOnSignals() {
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  return &g_cancel;
}

void ShowProgress(ProgressStyle style, const ProgressFigures& figures, absl::string_view verb) {
  if (style == ProgressStyle::kBar) {
    std::cerr << "\r\033[K" << ProgressBar(figures) << std::flush;  // cleared: a shorter line leaves nothing behind
  } else if (style == ProgressStyle::kLog) {
    LOG(INFO) << verb << " " << ProgressLine(figures);
  }
}

}  // namespace stoker
