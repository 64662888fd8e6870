#include "client/programs/ladder.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace stoker {

bool ServersShareCores(const std::vector<std::string>& servers) {
  return std::any_of(servers.begin(), servers.end(), [](const std::string& s) {
    return absl::StartsWith(s, "127.") || absl::StartsWith(s, "localhost") || absl::StartsWith(s, "[::1]");
  });
}

std::vector<LadderStep> LadderSteps() {
  return {
      {"device-cached", "step", 0, 0},             // one batch kept on the device: the training step alone
      {"host-cached", "h2d", 0, 0},                // one batch in host memory, copied to the device each step
      {"server-cached batch", "network", 0, 0},    // serialization, network and the client's receive path
      {"server-cached decoded", "augment", 0, 0},  // augmentation and batch assembly
      {"server-cached raw", "decode", 0, 0},       // decoding
      {"full pipeline", "storage", 0, 0},          // the storage read
  };
}

LadderStep ColdCacheStep(double full_rate, double copy_seconds, int64_t samples) {
  LadderStep s{"cold cache (first epoch)", "store", 0, 0};
  s.first_epoch_only = true;
  if (full_rate > 0 && samples > 0) s.images_per_second = 1 / (1 / full_rate + copy_seconds / samples);
  return s;
}

LadderResult AnalyzeLadder(std::vector<LadderStep> steps, bool servers_share_cores, double min_share, bool crop_first) {
  // Each step adds a cost per image: 1/rate - 1/(rate of the step before).
  // The stage adding the most time per image is the one to fix; without it
  // the full pipeline would cost that much less per image.
  LadderResult r;
  r.bottleneck = "none";
  r.current = 0;
  for (const LadderStep& s : steps) {
    if (!s.first_epoch_only) r.current = s.images_per_second;
  }
  double worst = 0;
  for (size_t i = 1; i < steps.size(); ++i) {
    const double before = steps[i - 1].images_per_second, now = steps[i].images_per_second;
    if (before <= 0 || now <= 0) continue;
    steps[i].change = now / before - 1;
    if (steps[i].first_epoch_only) continue;
    const double added = 1 / now - 1 / before;  // seconds per image
    if (added > worst) {
      worst = added;
      r.bottleneck = steps[i].adds;
    }
  }
  if (r.current <= 0 || worst < min_share / r.current) {
    r.bottleneck = "none";
    r.without = r.current;
  } else {
    // Steps need not slow down one after another (see the crop caveat), so
    // the stage's cost can exceed the full pipeline's time per image: then
    // the ceiling is the first step's rate.
    const double rest = 1 / r.current - worst;
    const double ceiling = steps.empty() ? 0 : steps.front().images_per_second;
    r.without = rest > 0 ? std::min(1 / rest, ceiling) : ceiling;
  }
  if (servers_share_cores) {
    r.caveats.push_back(
        "servers and this client share CPU cores: a drop can come from CPU saturation caused by an earlier stage");
  }
  r.caveats.push_back(
      "the cached steps reuse one batch or 64 samples: with inputs of very different sizes they may not represent "
      "the dataset");
  if (crop_first) {
    r.caveats.push_back(
        "the pipeline starts with a crop, which normally decodes only the crop's region; the decoded-cache step crops "
        "whole decoded images, so augment can look costlier, and decode cheaper, than in the full pipeline");
  }
  r.steps = std::move(steps);
  return r;
}

std::string LadderTable(const LadderResult& r) {
  std::string out = absl::StrFormat("  %-24s %12s %10s   %s\n", "step", "images/s", "change", "stage added");
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const LadderStep& s = r.steps[i];
    absl::StrAppendFormat(&out, "  %-24s %12.1f %10s   %s%s\n", s.name, s.images_per_second,
                          i == 0 ? "-" : absl::StrFormat("%+.1f%%", 100 * s.change), s.adds,
                          s.first_epoch_only ? " (first epoch only; later epochs read the cache)" : "");
  }
  if (r.bottleneck == "none") {
    absl::StrAppendFormat(&out, "bottleneck: none: the input path keeps up with the training step (%.1f images/s)\n",
                          r.current);
  } else {
    absl::StrAppendFormat(&out, "bottleneck: %s: removing it could take %.1f images/s to %.1f (%.2fx)\n", r.bottleneck,
                          r.current, r.without, r.current > 0 ? r.without / r.current : 0.0);
  }
  for (const std::string& c : r.caveats) absl::StrAppend(&out, "caveat: ", c, "\n");
  return out;
}

std::string LadderJson(const LadderResult& r) {
  nlohmann::json j;
  for (const LadderStep& s : r.steps) {
    j["steps"].push_back({{"step", s.name},
                          {"adds", s.adds},
                          {"images_per_second", s.images_per_second},
                          {"change", s.change},
                          {"first_epoch_only", s.first_epoch_only}});
  }
  j["bottleneck"] = r.bottleneck;
  j["images_per_second"] = r.current;
  j["images_per_second_without_bottleneck"] = r.without;
  j["caveats"] = r.caveats;
  return j.dump(2);
}

namespace {
std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}
}  // namespace

std::string LadderHtml(const LadderResult& r, const std::string& title) {
  // Scale to the steps after the first: with no training step time the
  // device-cached rate is practically unbounded; its bar is clipped.
  double top = 1;
  for (size_t i = r.steps.size() > 1 ? 1 : 0; i < r.steps.size(); ++i)
    top = std::max(top, r.steps[i].images_per_second);
  const int bar_h = 34, width = 520, left = 190;
  std::string svg = absl::StrFormat("<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d'>",
                                    left + width + 120, bar_h * static_cast<int>(r.steps.size()) + 10);
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const LadderStep& s = r.steps[i];
    const int y = 5 + bar_h * static_cast<int>(i);
    const int w = static_cast<int>(width * std::min(1.0, s.images_per_second / top));
    const bool guilty = s.adds == r.bottleneck;
    absl::StrAppendFormat(&svg, "<text x='0' y='%d' font-size='13'>%s</text>", y + 19, Escape(s.name));
    absl::StrAppendFormat(&svg, "<rect x='%d' y='%d' width='%d' height='%d' fill='%s'/>", left, y, std::max(w, 1),
                          bar_h - 8, guilty ? "#d9534f" : "#4a7ebb");
    absl::StrAppendFormat(&svg, "<text x='%d' y='%d' font-size='12'>%.1f/s (+%s)</text>", left + std::max(w, 1) + 6,
                          y + 19, s.images_per_second, Escape(s.adds));
  }
  svg += "</svg>";
  std::string caveats;
  for (const std::string& c : r.caveats) caveats += "<li>" + Escape(c) + "</li>";
  return absl::StrCat("<!DOCTYPE html><html><head><meta charset='utf-8'><title>", Escape(title),
                      "</title></head><body style='font-family:sans-serif'><h1>", Escape(title), "</h1>", svg,
                      "<p><b>bottleneck: ", Escape(r.bottleneck), "</b></p><pre>", Escape(LadderTable(r)), "</pre><ul>",
                      caveats, "</ul></body></html>\n");
}

}  // namespace stoker
