#include "dataplane/decode/image_header.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"

namespace stoker {
namespace {

uint32_t Read32(const unsigned char* p, bool big) {
  return big ? (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3]
             : uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
uint16_t Read16(const unsigned char* p, bool big) {
  return static_cast<uint16_t>(big ? (p[0] << 8) | p[1] : p[0] | (p[1] << 8));
}

// The next decimal in a PNM header, skipping whitespace and '#' comments.
// The byte after the digits is consumed as their terminator, whatever it is,
// as OpenCV's reader does: in "3333#2333\n5" the height is 2333, not 5 (the
// fuzzer found a header we read as 3333x5 that OpenCV decoded as 3333x233333,
// past --max-pixels).
std::optional<int64_t> NextNumber(absl::string_view bytes, size_t* pos) {
  while (*pos < bytes.size()) {
    const char c = bytes[*pos];
    if (c == '#') {
      while (*pos < bytes.size() && bytes[*pos] != '\n') ++*pos;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++*pos;
    } else {
      break;
    }
  }
  int64_t v = 0;
  size_t digits = 0;
  while (*pos < bytes.size() && std::isdigit(static_cast<unsigned char>(bytes[*pos])) && digits < 12) {
    v = v * 10 + (bytes[*pos] - '0');
    ++*pos;
    ++digits;
  }
  if (digits == 0 || digits == 12) return std::nullopt;
  if (*pos < bytes.size()) ++*pos;  // the terminator
  return v;
}

}  // namespace

std::optional<HeaderSize> ReadBmpHeader(absl::string_view bytes) {
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 26 || bytes[0] != 'B' || bytes[1] != 'M') return std::nullopt;
  const uint32_t dib = Read32(u + 14, false);
  if (dib == 12) return HeaderSize{Read16(u + 18, false), Read16(u + 20, false)};  // OS/2 core header
  if (dib < 40) return std::nullopt;
  const int64_t w = static_cast<int32_t>(Read32(u + 18, false));
  const int64_t h = static_cast<int32_t>(Read32(u + 22, false));  // negative: rows top-down
  return HeaderSize{w < 0 ? -w : w, h < 0 ? -h : h};
}

std::optional<HeaderSize> ReadPnmHeader(absl::string_view bytes) {
  // "P1".."P7" and whitespace, as the format requires (and OpenCV's reader
  // checks: without it OpenCV looks for another decoder for the bytes).
  if (bytes.size() < 3 || bytes[0] != 'P' || bytes[1] < '1' || bytes[1] > '7' ||
      !absl::ascii_isspace(static_cast<unsigned char>(bytes[2]))) {
    return std::nullopt;
  }
  size_t pos = 2;
  if (bytes[1] != '7') {
    const auto w = NextNumber(bytes, &pos);
    const auto h = w ? NextNumber(bytes, &pos) : std::nullopt;
    if (!h) return std::nullopt;
    return HeaderSize{*w, *h};
  }
  // PAM: "WIDTH n" and "HEIGHT n" lines before ENDHDR, within the first KiB.
  const absl::string_view head = bytes.substr(0, 1024);
  std::optional<int64_t> w, h;
  for (const char* key : {"WIDTH", "HEIGHT"}) {
    const size_t at = head.find(key);
    if (at == absl::string_view::npos) return std::nullopt;
    size_t p = at + std::strlen(key);
    (key[0] == 'W' ? w : h) = NextNumber(head, &p);
  }
  if (!w || !h) return std::nullopt;
  return HeaderSize{*w, *h};
}

std::optional<HeaderSize> ReadTiffHeader(absl::string_view bytes) {
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 8) return std::nullopt;
  const bool little = bytes.substr(0, 4) == absl::string_view("II*\0", 4);
  const bool big = bytes.substr(0, 4) == absl::string_view("MM\0*", 4);
  if (!little && !big) return std::nullopt;  // also BigTIFF ("II+"), which is refused
  const uint32_t ifd = Read32(u + 4, big);
  if (ifd > bytes.size() || bytes.size() - ifd < 2) return std::nullopt;
  const uint16_t entries = Read16(u + ifd, big);
  if ((bytes.size() - ifd - 2) / 12 < entries) return std::nullopt;
  std::optional<int64_t> w, h;
  for (uint16_t i = 0; i < entries; ++i) {
    const unsigned char* e = u + ifd + 2 + 12 * i;
    const uint16_t tag = Read16(e, big), type = Read16(e + 2, big);
    if (tag != 256 && tag != 257) continue;
    int64_t v;
    if (type == 3) {
      v = Read16(e + 8, big);  // SHORT
    } else if (type == 4) {
      v = Read32(e + 8, big);  // LONG
    } else {
      return std::nullopt;
    }
    (tag == 256 ? w : h) = v;
  }
  if (!w || !h) return std::nullopt;
  return HeaderSize{*w, *h};
}

}  // namespace stoker
