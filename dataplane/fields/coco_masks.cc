#include "dataplane/fields/coco_masks.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace stoker {
namespace {

// pycocotools works on a grid 5 times finer than the pixels.
constexpr double kUpsample = 5.0;

struct Point {
  int64_t x, y;
};

// The integer points along the edge a -> b on the fine grid, walked along
// the longer axis; edges are always walked from their lower end on that axis
// so that an edge and its reverse give the same points.
void WalkEdge(Point a, Point b, std::vector<Point>* out) {
  const int64_t dx = std::llabs(b.x - a.x), dy = std::llabs(b.y - a.y);
  const bool along_x = dx >= dy;
  const bool reversed = along_x ? a.x > b.x : a.y > b.y;
  if (reversed) std::swap(a, b);
  const int64_t steps = along_x ? dx : dy;
  const double slope = steps == 0 ? 0.0
                       : along_x  ? static_cast<double>(b.y - a.y) / static_cast<double>(dx)
                                  : static_cast<double>(b.x - a.x) / static_cast<double>(dy);
  for (int64_t d = 0; d <= steps; ++d) {
    const int64_t t = reversed ? steps - d : d;  // keep the walk in the edge's own direction
    if (along_x) {
      out->push_back({a.x + t, static_cast<int64_t>(static_cast<double>(a.y) + slope * static_cast<double>(t) + 0.5)});
    } else {
      out->push_back({static_cast<int64_t>(static_cast<double>(a.x) + slope * static_cast<double>(t) + 0.5), a.y + t});
    }
  }
}

}  // namespace

int64_t PolygonBoundaryPoints(const std::vector<double>& xy) {
  const size_t k = xy.size() / 2;
  int64_t points = 0;
  auto at = [&](size_t j) {
    const size_t i = j % k;
    return Point{static_cast<int64_t>(kUpsample * xy[2 * i] + 0.5),
                 static_cast<int64_t>(kUpsample * xy[2 * i + 1] + 0.5)};
  };
  for (size_t j = 0; j < k; ++j) {
    const Point a = at(j), b = at(j + 1);
    points += std::max(std::llabs(b.x - a.x), std::llabs(b.y - a.y)) + 1;
  }
  return points;
}

absl::StatusOr<RunLengths> PolygonRuns(const std::vector<double>& xy, int height, int width) {
  RunLengths runs;
  runs.height = height;
  runs.width = width;
  const size_t k = xy.size() / 2;
  std::vector<Point> vertices(k + 1);
  for (size_t j = 0; j < k; ++j) {
    vertices[j] = {static_cast<int64_t>(kUpsample * xy[2 * j] + 0.5),
                   static_cast<int64_t>(kUpsample * xy[2 * j + 1] + 0.5)};
  }
  vertices[k] = vertices[0];
  int64_t points = 0;
  for (size_t j = 0; j < k; ++j) {
    points +=
        std::max(std::llabs(vertices[j + 1].x - vertices[j].x), std::llabs(vertices[j + 1].y - vertices[j].y)) + 1;
    if (points > kMaxPolygonBoundaryPoints) {
      return absl::InvalidArgumentError(absl::StrCat("a polygon whose boundary passes ", kMaxPolygonBoundaryPoints,
                                                     " points on pycocotools' 5x grid"));
    }
  }
  std::vector<Point> boundary;
  boundary.reserve(static_cast<size_t>(points));
  for (size_t j = 0; j < k; ++j) WalkEdge(vertices[j], vertices[j + 1], &boundary);
  // Where the boundary moves to another fine column, it crosses a pixel
  // column's centre at most once: that pixel (and those below it, up to the
  // next crossing) toggles in column-major order.
  std::vector<uint64_t> toggles;
  const uint64_t h = static_cast<uint64_t>(height), w = static_cast<uint64_t>(width);
  for (size_t j = 1; j < boundary.size(); ++j) {
    const Point& p = boundary[j];
    const Point& q = boundary[j - 1];
    if (p.x == q.x) continue;
    double xd = static_cast<double>(p.x < q.x ? p.x : p.x - 1);
    xd = (xd + 0.5) / kUpsample - 0.5;
    if (std::floor(xd) != xd || xd < 0 || xd > static_cast<double>(width) - 1) continue;
    double yd = static_cast<double>(std::min(p.y, q.y));
    yd = (yd + 0.5) / kUpsample - 0.5;
    yd = std::ceil(std::clamp(yd, 0.0, static_cast<double>(height)));
    toggles.push_back(static_cast<uint64_t>(xd) * h + static_cast<uint64_t>(yd));
  }
  toggles.push_back(h * w);
  std::sort(toggles.begin(), toggles.end());
  // Differences are run lengths; a zero-length run joins its neighbours.
  uint64_t previous = 0;
  std::vector<uint64_t> lengths;
  for (uint64_t t : toggles) {
    lengths.push_back(t - previous);
    previous = t;
  }
  size_t j = 0;
  runs.counts.push_back(static_cast<uint32_t>(lengths[j++]));
  while (j < lengths.size()) {
    if (lengths[j] > 0) {
      runs.counts.push_back(static_cast<uint32_t>(lengths[j++]));
    } else if (++j < lengths.size()) {
      runs.counts.back() += static_cast<uint32_t>(lengths[j++]);
    }
  }
  return runs;
}

absl::StatusOr<RunLengths> DecodeCompressedRuns(absl::string_view counts, int height, int width) {
  RunLengths runs;
  runs.height = height;
  runs.width = width;
  size_t p = 0;
  while (p < counts.size()) {
    int64_t value = 0;
    int shift = 0;
    bool more = true;
    while (more) {
      if (p >= counts.size()) return absl::InvalidArgumentError("RLE counts end inside a number");
      const int c = static_cast<unsigned char>(counts[p]) - 48;
      if (c < 0 || c > 63) {
        return absl::InvalidArgumentError(
            absl::StrCat("RLE counts hold byte ", static_cast<int>(counts[p]), " at ", p, " (not in '0'..'o')"));
      }
      if (shift > 30) return absl::InvalidArgumentError(absl::StrCat("RLE count at ", p, " is too long"));
      value |= static_cast<int64_t>(c & 0x1f) << shift;
      more = (c & 0x20) != 0;
      ++p;
      shift += 5;
      if (!more && (c & 0x10)) value -= int64_t{1} << shift;  // negative: sign-extend
    }
    // Counts past the second are stored as differences from the one two before.
    if (runs.counts.size() > 2) value += runs.counts[runs.counts.size() - 2];
    if (value < 0 || value > int64_t{height} * width) {
      return absl::InvalidArgumentError(absl::StrCat("RLE count ", runs.counts.size(), " is ", value));
    }
    runs.counts.push_back(static_cast<uint32_t>(value));
  }
  if (absl::Status s = CheckRuns(runs); !s.ok()) return s;
  return runs;
}

absl::Status CheckRuns(const RunLengths& runs) {
  uint64_t total = 0;
  for (uint32_t c : runs.counts) total += c;
  const uint64_t want = static_cast<uint64_t>(runs.height) * static_cast<uint64_t>(runs.width);
  if (total != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("RLE counts cover ", total, " pixels; a ", runs.width, "x", runs.height, " mask has ", want));
  }
  return absl::OkStatus();
}

void PaintRuns(const RunLengths& runs, cv::Mat* mask) {
  if (mask->empty()) *mask = cv::Mat::zeros(runs.height, runs.width, CV_8U);
  const uint64_t h = static_cast<uint64_t>(runs.height);
  uint64_t at = 0;
  bool on = false;
  for (uint32_t c : runs.counts) {
    if (on) {
      for (uint64_t i = at; i < at + c; ++i) mask->at<uint8_t>(static_cast<int>(i % h), static_cast<int>(i / h)) = 1;
    }
    at += c;
    on = !on;
  }
}

}  // namespace stoker
