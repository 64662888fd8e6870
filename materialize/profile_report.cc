#include "materialize/profile_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "dataplane/ops/pipeline_text.h"

namespace stoker {
namespace {

double SourceRate(const ProfileResult& r) {
  for (const Strategy& s : r.strategies) {
    if (!s.materialised) return s.images_per_worker_second;
  }
  return 0;
}

std::string Ratio(double x, double base) { return base > 0 ? absl::StrFormat("%.2fx", x / base) : "-"; }

std::string Escape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

std::string Heading(const ProfileResult& r, const Weights& w) {
  return absl::StrFormat(
      "profile of '%s' (%d samples) for pipeline '%s': %d samples measured; offline on %d local worker%s, "
      "extrapolated to the whole dataset; online: %s, batch %d, median of %d round%s; weights "
      "preprocessing,storage,throughput = %s",
      r.dataset, r.dataset_samples, r.pipeline, r.sample, r.offline_workers, r.offline_workers == 1 ? "" : "s",
      r.server_workers > 0 ? absl::StrCat("a server with ", r.server_workers, " worker thread(s) on 127.0.0.1")
                           : std::string("the given servers"),
      r.batch_size, r.rounds, r.rounds == 1 ? "" : "s", WeightsText(w));
}

// The chart: throughput (y) against storage (x, logarithmic), one point per
// strategy; the Pareto front filled, the recommendation ringed.
std::string Chart(const ProfileResult& r, size_t recommended) {
  constexpr double kW = 760, kH = 420, kLeft = 80, kRight = 20, kTop = 20, kBottom = 50;
  double xlo = INFINITY, xhi = 0, yhi = 0;
  for (const Strategy& s : r.strategies) {
    xlo = std::min(xlo, std::max(1.0, s.storage_bytes));
    xhi = std::max(xhi, std::max(1.0, s.storage_bytes));
    yhi = std::max(yhi, s.images_per_worker_second);
  }
  const double lx0 = std::log10(xlo) - 0.1, lx1 = std::log10(xhi) + 0.1;
  yhi = yhi > 0 ? yhi * 1.1 : 1;
  auto X = [&](double b) { return kLeft + (std::log10(std::max(1.0, b)) - lx0) / (lx1 - lx0) * (kW - kLeft - kRight); };
  auto Y = [&](double v) { return kH - kBottom - v / yhi * (kH - kTop - kBottom); };
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n"
      "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n",
      kW, kH, kLeft, kH - kBottom, kW - kRight, kH - kBottom, kLeft, kTop, kLeft, kH - kBottom);
  for (int e = static_cast<int>(std::ceil(lx0)); e <= static_cast<int>(std::floor(lx1)); ++e) {
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n", X(std::pow(10, e)),
                          kH - kBottom + 15, HumanBytes(std::pow(10, e)));
  }
  for (int k = 0; k <= 4; ++k) {
    absl::StrAppendFormat(&svg, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n", kLeft - 5,
                          Y(yhi * k / 5) + 4, yhi * k / 5);
  }
  absl::StrAppendFormat(&svg,
                        "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">storage for the whole dataset "
                        "(log scale)</text>\n<text x=\"15\" y=\"%.0f\" transform=\"rotate(-90 15 %.0f)\" "
                        "text-anchor=\"middle\">images per worker-second</text>\n",
                        (kLeft + kW - kRight) / 2, kH - 10, (kTop + kH - kBottom) / 2, (kTop + kH - kBottom) / 2);
  for (size_t i = 0; i < r.strategies.size(); ++i) {
    const Strategy& s = r.strategies[i];
    const double x = X(s.storage_bytes), y = Y(s.images_per_worker_second);
    absl::StrAppendFormat(&svg,
                          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\" stroke=\"%s\" stroke-width=\"%d\">"
                          "<title>%s</title></circle>\n",
                          x, y, i == recommended ? 7 : 4, s.pareto ? "#1f77b4" : "white",
                          i == recommended ? "#d62728" : "#1f77b4", i == recommended ? 3 : 1, Escape(s.name));
    if (s.pareto || i == recommended) {
      absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x + 8, y - 6, Escape(s.name));
    }
  }
  return svg + "</svg>\n";
}

}  // namespace

std::string HumanBytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%.0f B", bytes) : absl::StrFormat("%.1f %s", bytes, kUnits[u]);
}

std::string ProfileTable(const ProfileResult& r, const Weights& w, size_t recommended) {
  const double base = SourceRate(r);
  std::string out = Heading(r, w) + "\n";
  int width = 8;
  for (const Strategy& s : r.strategies) width = std::max(width, static_cast<int>(s.name.size()));
  absl::StrAppendFormat(&out, "  %-*s %10s %11s %12s %15s %9s %11s %6s %6s\n", width, "strategy", "offline s",
                        "storage", "read B/smpl", "images/worker-s", "vs source", "wire B/smpl", "pareto", "score");
  for (size_t i = 0; i < r.strategies.size(); ++i) {
    const Strategy& s = r.strategies[i];
    absl::StrAppendFormat(
        &out, "%s %-*s %10.1f %11s %12.0f %15.1f %9s %11.0f %6s %6.3f\n", i == recommended ? ">" : " ", width, s.name,
        s.offline_seconds, HumanBytes(s.storage_bytes), s.stored_bytes_per_sample, s.images_per_worker_second,
        Ratio(s.images_per_worker_second, base), s.wire_bytes_per_sample, s.pareto ? "*" : "", s.score);
  }
  const Strategy& pick = r.strategies[recommended];
  absl::StrAppendFormat(&out, "recommended: %s (%.1f images/worker-s, %s stored, %.0f s offline)\n", pick.name,
                        pick.images_per_worker_second, HumanBytes(pick.storage_bytes), pick.offline_seconds);
  if (pick.materialised) {
    absl::StrAppendFormat(
        &out, "  stoker-materialize --dataset %s --prefix '%s' --format %s --compression %s --out DIR\n", r.dataset,
        PipelineToText(pick.prefix), pick.format.EncodingText(), pick.format.CompressionText());
  }
  return out;
}

nlohmann::json ProfileJson(const ProfileResult& r, const Weights& w, size_t recommended) {
  nlohmann::json strategies = nlohmann::json::array();
  const double base = SourceRate(r);
  for (const Strategy& s : r.strategies) {
    strategies.push_back(
        {{"name", s.name},
         {"materialised", s.materialised},
         {"prefix", s.materialised ? nlohmann::json(PipelineToText(s.prefix)) : nlohmann::json()},
         {"format", s.materialised ? nlohmann::json(s.format.EncodingText()) : nlohmann::json()},
         {"compression", s.materialised ? nlohmann::json(s.format.CompressionText()) : nlohmann::json()},
         {"offline_seconds", s.offline_seconds},
         {"storage_bytes", s.storage_bytes},
         {"stored_bytes_per_sample", s.stored_bytes_per_sample},
         {"images_per_worker_second", s.images_per_worker_second},
         {"ratio_vs_source", base > 0 ? s.images_per_worker_second / base : 0},
         {"wire_bytes_per_sample", s.wire_bytes_per_sample},
         {"pareto", s.pareto},
         {"score", s.score}});
  }
  return {{"dataset", r.dataset},
          {"dataset_samples", r.dataset_samples},
          {"pipeline", r.pipeline},
          {"sample", r.sample},
          {"offline_workers", r.offline_workers},
          {"server_workers", r.server_workers},
          {"rounds", r.rounds},
          {"batch_size", r.batch_size},
          {"weights", {{"preprocessing", w.preprocessing}, {"storage", w.storage}, {"throughput", w.throughput}}},
          {"recommended", r.strategies[recommended].name},
          {"strategies", strategies}};
}

std::string ProfileHtml(const ProfileResult& r, const Weights& w, size_t recommended) {
  const double base = SourceRate(r);
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>stoker-profile: ", Escape(r.dataset),
      "</title>\n<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child{text-align:left}"
      "tr.pick{background:#fde0dd}</style></head><body>\n<h1>stoker-profile</h1>\n<p>",
      Escape(Heading(r, w)), "</p>\n<p>Recommended: <b>", Escape(r.strategies[recommended].name),
      "</b>. Filled points are on the Pareto front (no other strategy is better on offline time, storage and "
      "throughput at once); the ringed point is the recommendation.</p>\n",
      Chart(r, recommended),
      "<table>\n<tr><th>strategy</th><th>offline s</th><th>storage</th><th>read bytes/sample</th>"
      "<th>images/worker-s</th><th>vs source</th><th>wire bytes/sample</th><th>Pareto</th><th>score</th></tr>\n");
  for (size_t i = 0; i < r.strategies.size(); ++i) {
    const Strategy& s = r.strategies[i];
    absl::StrAppendFormat(&html,
                          "<tr%s><td>%s</td><td>%.1f</td><td>%s</td><td>%.0f</td><td>%.1f</td><td>%s</td>"
                          "<td>%.0f</td><td>%s</td><td>%.3f</td></tr>\n",
                          i == recommended ? " class=\"pick\"" : "", Escape(s.name), s.offline_seconds,
                          HumanBytes(s.storage_bytes), s.stored_bytes_per_sample, s.images_per_worker_second,
                          Ratio(s.images_per_worker_second, base), s.wire_bytes_per_sample, s.pareto ? "yes" : "",
                          s.score);
  }
  return html + "</table>\n</body></html>\n";
}

}  // namespace stoker
