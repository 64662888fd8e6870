// COCO segmentations as binary masks, with the semantics of pycocotools
// (the reference every COCO user's masks come from): polygons rasterised as
// its rleFrPoly does (vertices on a 5x finer grid, boundary walked
// edge by edge, a pixel is inside when its centre is), several polygons of
// one object merged, and run-length encodings, compressed (COCO's string
// form) or not, decoded column by column. Pure functions; thread-safe.
#ifndef STOKER_DATAPLANE_FIELDS_COCO_MASKS_H_
#define STOKER_DATAPLANE_FIELDS_COCO_MASKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stoker {

// Run lengths of a height x width mask in column-major order, starting
// with a run of zeros.
struct RunLengths {
  int height = 0, width = 0;
  std::vector<uint32_t> counts;
};

// Boundary points one polygon may walk on pycocotools' 5x grid (its
// perimeter in pixels x 5); a longer one is refused rather than allocated.
inline constexpr int64_t kMaxPolygonBoundaryPoints = int64_t{1} << 22;

// One polygon (x0, y0, x1, y1, ...), at least 3 points, as pycocotools'
// frPyObjects/frPoly. INVALID_ARGUMENT when its boundary is longer than
// kMaxPolygonBoundaryPoints.
absl::StatusOr<RunLengths> PolygonRuns(const std::vector<double>& xy, int height, int width);
// The boundary points PolygonRuns would walk for `xy` (without walking them).
int64_t PolygonBoundaryPoints(const std::vector<double>& xy);

// COCO's compressed counts string. INVALID_ARGUMENT naming the problem when
// it does not decode to runs that fill height x width.
absl::StatusOr<RunLengths> DecodeCompressedRuns(absl::string_view counts, int height, int width);

// Checks uncompressed counts fill height x width exactly.
absl::Status CheckRuns(const RunLengths& runs);

// The CV_8U 0/1 mask (height rows x width columns) of runs; ORed into *mask
// when it is not empty (the merge of several polygons).
void PaintRuns(const RunLengths& runs, cv::Mat* mask);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_FIELDS_COCO_MASKS_H_
