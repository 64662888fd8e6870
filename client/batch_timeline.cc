#include "client/batch_timeline.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace stoker {

BatchTiming& BatchTimeline::Add(absl::Time delivered, absl::Duration waited, const Batch& batch) {
  BatchTiming t;
  t.epoch = batch.epoch;
  t.batch = batch.batch_index;
  t.server = batch.server;
  t.at_s = absl::ToDoubleSeconds(delivered - start_);
  t.inter_batch_ms = absl::ToDoubleMilliseconds(delivered - last_);
  t.wait_ms = absl::ToDoubleMilliseconds(waited);
  t.receive_ms = absl::ToDoubleMilliseconds(batch.receive_latency);
  const v1::StageTimes& s = batch.stage_times;
  t.queue_ms = 1e3 * s.queue_seconds();
  t.read_ms = 1e3 * s.read_seconds();
  t.decode_ms = 1e3 * s.decode_seconds();
  t.augment_ms = 1e3 * s.augment_seconds();
  t.python_ms = 1e3 * s.python_seconds();
  t.assemble_ms = 1e3 * s.assemble_seconds();
  t.server_ms = 1e3 * s.server_seconds();
  last_ = delivered;
  batches_.push_back(std::move(t));
  return batches_.back();
}

std::vector<BatchTiming> BatchTimeline::Slowest(size_t k) const {
  std::vector<BatchTiming> sorted = batches_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const BatchTiming& a, const BatchTiming& b) { return a.inter_batch_ms > b.inter_batch_ms; });
  sorted.resize(std::min(k, sorted.size()));
  return sorted;
}

namespace {

// Column order of the CSV and keys of the JSON; load-bearing for
// tests/bench/plot_timeline.py.
struct Column {
  const char* name;
  double BatchTiming::*field;
};
constexpr Column kColumns[] = {
    {"at_s", &BatchTiming::at_s},
    {"inter_batch_ms", &BatchTiming::inter_batch_ms},
    {"wait_ms", &BatchTiming::wait_ms},
    {"receive_ms", &BatchTiming::receive_ms},
    {"h2d_ms", &BatchTiming::h2d_ms},
    {"queue_ms", &BatchTiming::queue_ms},
    {"read_ms", &BatchTiming::read_ms},
    {"decode_ms", &BatchTiming::decode_ms},
    {"augment_ms", &BatchTiming::augment_ms},
    {"assemble_ms", &BatchTiming::assemble_ms},
    {"server_ms", &BatchTiming::server_ms},
    {"python_ms", &BatchTiming::python_ms},
};

}  // namespace

absl::Status BatchTimeline::Write(const std::string& path) const {
  std::ofstream out(path);
  if (!out) return absl::InvalidArgumentError(absl::StrCat("cannot write ", path));
  if (absl::EndsWith(path, ".json")) {
    nlohmann::json all = nlohmann::json::array();
    for (const BatchTiming& t : batches_) {
      nlohmann::json j = {{"epoch", t.epoch}, {"batch", t.batch}, {"server", t.server}};
      for (const Column& c : kColumns) j[c.name] = t.*c.field;
      all.push_back(std::move(j));
    }
    out << all.dump(1) << '\n';
  } else {
    out << "epoch,batch,server";
    for (const Column& c : kColumns) out << ',' << c.name;
    out << '\n';
    for (const BatchTiming& t : batches_) {
      out << t.epoch << ',' << t.batch << ',' << t.server;  // host:port has no comma
      for (const Column& c : kColumns) out << ',' << absl::StrFormat("%.3f", t.*c.field);
      out << '\n';
    }
  }
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("writing ", path, " failed"));
  return absl::OkStatus();
}

std::string BatchTimeline::Describe(const BatchTiming& t) {
  return absl::StrFormat(
      "epoch %d batch %d from %s: %.1f ms (waited %.1f, receive %.1f; server %.1f: queue %.1f, read %.1f, "
      "decode %.1f, augment %.1f, python %.1f, assemble %.1f; h2d %.1f)",
      t.epoch, t.batch, t.server, t.inter_batch_ms, t.wait_ms, t.receive_ms, t.server_ms, t.queue_ms, t.read_ms,
      t.decode_ms, t.augment_ms, t.python_ms, t.assemble_ms, t.h2d_ms);
}

}  // namespace stoker
