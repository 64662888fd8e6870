#include "dataplane/decode/media_matroska.h"

#include <algorithm>
#include <set>

namespace stoker_media {
namespace {

// EBML element IDs (RFC 8794, RFC 9559). Load-bearing: they are the format's.
constexpr uint32_t kEbmlHeader = 0x1A45DFA3, kSegment = 0x18538067, kSeekHead = 0x114D9B74, kSeek = 0x4DBB,
                   kSeekId = 0x53AB, kSeekPosition = 0x53AC, kAttachments = 0x1941A469;
constexpr uint8_t kVoid = 0xEC;
constexpr int kMaxElements = 100000;

struct Element {
  uint32_t id = 0;
  int64_t data = 0;   // where its payload starts
  int64_t size = -1;  // its payload's length; -1: unknown (to the end of its parent)
};

// A variable-length integer at data[*at]: an ID keeps its length marker, a
// size drops it (all ones: unknown). False past `end` or when malformed.
bool ReadVint(const uint8_t* data, int64_t end, int64_t* at, bool keep_marker, uint64_t* value, bool* unknown) {
  if (*at >= end) return false;
  const uint8_t first = data[*at];
  int length = 1;
  while (length <= 8 && (first & (0x80 >> (length - 1))) == 0) ++length;
  if (length > 8 || *at + length > end || (keep_marker && length > 4)) return false;
  uint64_t v = keep_marker ? first : (first & (0xFF >> length));
  bool all_ones = v == static_cast<uint64_t>(0xFF >> length);
  for (int i = 1; i < length; ++i) {
    v = (v << 8) | data[*at + i];
    all_ones = all_ones && data[*at + i] == 0xFF;
  }
  *at += length;
  *value = v;
  if (unknown != nullptr) *unknown = !keep_marker && all_ones;
  return true;
}

bool ReadElement(const uint8_t* data, int64_t end, int64_t at, Element* e) {
  uint64_t id = 0, size = 0;
  bool unknown = false;
  if (!ReadVint(data, end, &at, true, &id, nullptr) || !ReadVint(data, end, &at, false, &size, &unknown)) return false;
  e->id = static_cast<uint32_t>(id);
  e->data = at;
  e->size = unknown ? -1 : static_cast<int64_t>(std::min<uint64_t>(size, static_cast<uint64_t>(INT64_MAX / 2)));
  return true;
}

// The Void element that takes the place of [offset, offset + length): its ID,
// an 8-byte size, the rest left as it is (the payload of the Void).
InputPatch VoidOver(int64_t offset, int64_t length) {
  InputPatch p;
  p.offset = offset;
  p.bytes.push_back(static_cast<char>(kVoid));
  const uint64_t payload = static_cast<uint64_t>(length - 9);
  p.bytes.push_back(static_cast<char>(0x01));  // an 8-byte size: 0x01 then 7 bytes
  for (int i = 6; i >= 0; --i) p.bytes.push_back(static_cast<char>((payload >> (8 * i)) & 0xFF));
  return p;
}

// The positions of Attachments elements a SeekHead lists (relative to the
// Segment's payload).
void SeekTargets(const uint8_t* data, const Element& head, int64_t end, int* budget, std::vector<int64_t>* out) {
  const int64_t head_end = head.size < 0 ? end : std::min(end, head.data + head.size);
  for (int64_t at = head.data; at < head_end && --*budget > 0;) {
    Element seek;
    if (!ReadElement(data, head_end, at, &seek) || seek.size < 0) return;
    const int64_t seek_end = std::min(head_end, seek.data + seek.size);
    if (seek.id == kSeek) {
      uint32_t target = 0;
      int64_t position = -1;
      for (int64_t in = seek.data; in < seek_end && --*budget > 0;) {
        Element field;
        if (!ReadElement(data, seek_end, in, &field) || field.size < 0 || field.data + field.size > seek_end) break;
        if (field.id == kSeekId && field.size <= 4) {
          target = 0;
          for (int64_t i = 0; i < field.size; ++i) target = (target << 8) | data[field.data + i];
        } else if (field.id == kSeekPosition && field.size <= 8) {
          uint64_t v = 0;
          for (int64_t i = 0; i < field.size; ++i) v = (v << 8) | data[field.data + i];
          position = v > static_cast<uint64_t>(INT64_MAX / 2) ? -1 : static_cast<int64_t>(v);
        }
        in = field.data + field.size;
      }
      if (target == kAttachments && position >= 0) out->push_back(position);
    }
    at = seek.data + seek.size;
  }
}

}  // namespace

std::vector<InputPatch> HideMatroskaAttachments(const uint8_t* data, int64_t size) {
  Element header;
  if (!ReadElement(data, size, 0, &header) || header.id != kEbmlHeader || header.size < 0) return {};
  int budget = kMaxElements;
  std::set<int64_t> found;  // offsets of Attachments elements
  for (int64_t at = header.data + header.size; at < size && --budget > 0;) {
    Element top;
    if (!ReadElement(data, size, at, &top)) break;
    if (top.id == kSegment) {
      const int64_t end = top.size < 0 ? size : std::min(size, top.data + top.size);
      std::vector<int64_t> seeks;
      for (int64_t in = top.data; in < end && --budget > 0;) {
        Element child;
        if (!ReadElement(data, end, in, &child)) break;
        if (child.id == kAttachments) found.insert(in);
        if (child.id == kSeekHead) SeekTargets(data, child, end, &budget, &seeks);
        if (child.size < 0) break;  // a cluster being written: nothing after it can be found by size
        in = child.data + child.size;
      }
      for (int64_t position : seeks) {
        Element target;
        const int64_t at_target = top.data + position;
        if (at_target < end && ReadElement(data, end, at_target, &target) && target.id == kAttachments) {
          found.insert(at_target);
        }
      }
    }
    if (top.size < 0) break;
    at = top.data + top.size;
  }
  std::vector<InputPatch> patches;
  for (int64_t offset : found) {
    Element e;
    ReadElement(data, size, offset, &e);
    const int64_t length = (e.size < 0 ? size : std::min(size, e.data + e.size)) - offset;
    if (length >= 9) patches.push_back(VoidOver(offset, length));
  }
  return patches;
}

}  // namespace stoker_media
