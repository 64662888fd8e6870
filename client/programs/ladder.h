// The caching ladder of stoker-diagnose: the training loop's throughput
// measured while serving cached data at successive points of the path, from
// the GPU back to storage. Each step adds one stage; the time per image it
// adds (1/rate - 1/rate of the step before) says what the stage costs. The
// stage that adds the most is the one to fix, and the full pipeline without
// that cost is the gain. Pure functions; thread-safe.
#ifndef STOKER_CLIENT_PROGRAMS_LADDER_H_
#define STOKER_CLIENT_PROGRAMS_LADDER_H_

#include <string>
#include <vector>

#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

struct LadderStep {
  std::string name;  // e.g. "host-cached"
  std::string adds;  // what this step adds to the one before: h2d, network, augment, decode, storage
  double images_per_second = 0;
  double change = 0;  // relative to the step before (-0.4 = 40% slower); 0 for the first
  // A step of the first epoch only (the copy of a remote --data-root into a
  // cold cache): shown with its change, never the steady state's bottleneck.
  bool first_epoch_only = false;
};

// The cold-cache step (adds "store"): the full pipeline's first epoch when
// servers first copy the dataset from its store, `copy_seconds` for its
// `samples` samples (then serve at `full_rate`).
LadderStep ColdCacheStep(double full_rate, double copy_seconds, int64_t samples);

struct LadderResult {
  std::vector<LadderStep> steps;
  std::string bottleneck;  // the `adds` that costs most per image, or "none" (the training step limits)
  double current = 0;      // images/s of the last steady step (the full pipeline)
  double without = 0;      // images/s of the full pipeline without the bottleneck's cost
  std::vector<std::string> caveats;
};

// The ladder's steps in order, with what each adds. Load-bearing: the order
// and names are the report's contract.
std::vector<LadderStep> LadderSteps();

// Inputs of AnalyzeLadder's caveats: whether any server is on this machine
// (a loopback address), sharing its cores with the client; whether the
// pipeline starts with a crop is StartsWithCrop (op_registry.h).
bool ServersShareCores(const std::vector<std::string>& servers);

// Fills change, picks the bottleneck (a stage adding at least `min_share`,
// 10% by default, of the full pipeline's time per image, else "none") and
// adds the caveats that apply.
// `crop_first`: the pipeline starts with a crop, which the decoded-cache step
// must run on whole decoded images (no region decoding).
LadderResult AnalyzeLadder(std::vector<LadderStep> steps, bool servers_share_cores, double min_share = 0.10,
                           bool crop_first = false);

std::string LadderTable(const LadderResult& r);
std::string LadderJson(const LadderResult& r);
// A self-contained page with a bar chart (inline SVG) of the ladder.
std::string LadderHtml(const LadderResult& r, const std::string& title);

}  // namespace stoker

#endif  // STOKER_CLIENT_PROGRAMS_LADDER_H_
