// tar_shards' index (tar_index.h): ScanTar, a shard's members grouped into
// samples, and the sidecar that keeps them beside the shard.
#include "dataplane/sources/tar_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "dataplane/decode/file_kinds.h"
#include "glog/logging.h"

namespace stoker {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kBlock = 512;
// Sidecar format. Load-bearing: bump the version when the format changes;
// sidecars of another version are rebuilt (3: label "x", a .cls that is not
// an integer).
constexpr char kIndexMagic[] = "stoker-tar-index 3";

bool ReadAtImpl(int fd, void* buf, int64_t size, int64_t offset) {
  char* p = static_cast<char*>(buf);
  while (size > 0) {
    const ssize_t n = pread(fd, p, static_cast<size_t>(size), offset);
    if (n <= 0) return false;
    p += n;
    size -= n;
    offset += n;
  }
  return true;
}

// An octal (or GNU base-256) numeric header field; -1 if malformed,
// negative, or wider than 63 bits.
int64_t ParseNumber(const unsigned char* field, int width) {
  if (field[0] & 0x80) {  // base-256, two's complement: 0xff.. is negative
    if (field[0] & 0x40) return -1;
    int64_t v = field[0] & 0x3f;
    for (int i = 1; i < width; ++i) {
      if (v > (std::numeric_limits<int64_t>::max() >> 8)) return -1;
      v = (v << 8) | field[i];
    }
    return v;
  }
  int64_t v = 0;
  int i = 0;
  while (i < width && (field[i] == ' ' || field[i] == 0)) ++i;
  bool digits = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    v = v * 8 + (field[i] - '0');
    digits = true;
  }
  return digits ? v : (i == width ? 0 : -1);
}

bool ChecksumMatches(const unsigned char* h) {
  const int64_t stored = ParseNumber(h + 148, 8);
  int64_t sum = 0;
  for (int i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : h[i];
  return stored == sum;
}

std::string Field(const unsigned char* p, size_t width) {
  const char* c = reinterpret_cast<const char*>(p);
  return std::string(c, strnlen(c, width));
}

// pax records: "<len> <key>=<value>\n".
void ParsePax(const std::string& data, std::string* path, int64_t* size) {
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t space = data.find(' ', pos);
    int64_t len = 0;
    if (space == std::string::npos || !absl::SimpleAtoi(data.substr(pos, space - pos), &len) || len <= 0) return;
    const std::string record = data.substr(space + 1, static_cast<size_t>(len) - (space - pos) - 2);
    const size_t eq = record.find('=');
    if (eq != std::string::npos) {
      const std::string key = record.substr(0, eq), value = record.substr(eq + 1);
      if (key == "path") *path = value;
      // Malformed or negative: use the header's.
      if (key == "size" && (!absl::SimpleAtoi(value, size) || *size < 0)) *size = -1;
    }
    pos += static_cast<size_t>(len);
  }
}

// WebDataset key and field of a member name: "dir/abc.seg.jpg" -> ("dir/abc", "seg.jpg").
std::pair<std::string, std::string> SplitKey(const std::string& name) {
  const size_t slash = name.rfind('/');
  const size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return {name, ""};
  return {name.substr(0, dot), absl::AsciiStrToLower(name.substr(dot + 1))};
}

}  // namespace

namespace tar_index {

bool ReadAt(int fd, void* buf, int64_t size, int64_t offset) { return ReadAtImpl(fd, buf, size, offset); }

bool IsImageField(const std::string& field, const std::string& wanted) {
  static const auto* kImage = new std::set<std::string>{"jpg", "jpeg", "png", "webp"};
  if (wanted.empty()) return kImage->count(field) > 0;
  if (wanted == kAudioMembers) return AudioExtensions().count("." + field) > 0;
  if (wanted == kVideoMembers) return VideoExtensions().count("." + field) > 0;
  return field == wanted;
}

std::string SidecarPath(const fs::path& shard, const std::string& image_field) {
  if (image_field == kAudioMembers) return shard.string() + kIndexSuffix + "-audio";
  if (image_field == kVideoMembers) return shard.string() + kIndexSuffix + "-video";
  return shard.string() + kIndexSuffix;
}

bool ValidLabel(int64_t label) { return label >= 0 && label < TarShardSource::kMaxClasses; }

// Reads a .cls member: label and labeled, or a bad label (-1).
void ReadLabel(int fd, const TarMember& m, TarShardSource::Sample* s, ShardIndex* index) {
  std::string text(static_cast<size_t>(std::min<int64_t>(m.size, 64)), '\0');
  int64_t label = 0;
  if (m.size < 64 && ReadAt(fd, text.data(), m.size, m.offset) &&
      absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &label)) {
    s->label = ValidLabel(label) ? static_cast<int32_t>(label) : -1;
    s->labeled = ValidLabel(label);
  } else {
    ++index->unparsed_labels;
    s->label_unreadable = true;
  }
}

absl::StatusOr<ShardIndex> BuildIndex(const fs::path& shard, int fd, const std::string& image_field) {
  absl::StatusOr<TarScan> scan = ScanTar(shard, fd);
  if (!scan.ok()) return scan.status();
  ShardIndex index;
  index.damage = scan->damage;
  index.skipped = scan->skipped;
  index.first_skipped = scan->first_skipped;
  ExtensionTable table(&index.extensions);
  std::map<std::string, size_t> by_key;       // key -> position in index.samples
  std::set<std::pair<size_t, int32_t>> seen;  // (sample, extension): duplicates found in O(log n)
  for (const TarMember& m : scan->members) {
    const auto [key, field] = SplitKey(m.name);
    auto [it, inserted] = by_key.emplace(key, index.samples.size());
    if (inserted) {
      TarShardSource::Sample s;
      s.key = key;
      s.offset = -1;
      index.samples.push_back(std::move(s));
    }
    TarShardSource::Sample& s = index.samples[it->second];
    const int32_t ext = table.Id(field);
    if (!seen.emplace(it->second, ext).second) {
      if (index.duplicates++ == 0) index.first_duplicate = m.name;
      continue;  // the first member of a key and extension is the sample's
    }
    if (static_cast<int64_t>(s.members.size()) >= kMaxMembersPerSample) {
      if (index.skipped++ == 0) {
        index.first_skipped = absl::StrCat("key '", absl::CHexEscape(key.substr(0, 100)), "' has more than ",
                                           kMaxMembersPerSample, " members");
      }
      continue;
    }
    s.members.push_back({ext, m.offset, m.size});
    if (IsImageField(field, image_field) && s.offset < 0) {
      s.offset = m.offset;
      s.size = m.size;
    } else if (field == "cls") {
      ReadLabel(fd, m, &s, &index);
    }
  }
  // Samples without an image cannot be served; those with a label past the
  // class limit would make every session allocate that many class names.
  index.samples.erase(
      std::remove_if(index.samples.begin(), index.samples.end(), [](const auto& s) { return s.offset < 0; }),
      index.samples.end());
  const auto bad =
      std::remove_if(index.samples.begin(), index.samples.end(), [](const auto& s) { return s.label < 0; });
  index.bad_labels = index.samples.end() - bad;
  index.samples.erase(bad, index.samples.end());
  return index;
}

// The field is part of the header: an index built for another field is rebuilt.
std::string IndexHeader(const struct stat& st, const std::string& image_field) {
  std::string header = absl::StrCat(kIndexMagic, " ", st.st_size, " ", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
  if (!image_field.empty()) absl::StrAppend(&header, " field=", image_field);
  return header;
}

// One sidecar line: key, image offset, size, label ("u": unlabeled), then
// extension, offset, size of each member; key and extensions C-escaped.
bool ParseSidecarLine(const std::string& line, const struct stat& st, ExtensionTable& table,
                      TarShardSource::Sample* s) {
  std::vector<std::string> parts = absl::StrSplit(line, '\t');
  if (parts.size() < 4 || (parts.size() - 4) % 3 != 0 ||  // an empty key (".jpg") is a key
      !absl::CUnescape(parts[0], &s->key) || !absl::SimpleAtoi(parts[1], &s->offset) ||
      !absl::SimpleAtoi(parts[2], &s->size)) {
    return false;
  }
  s->label_unreadable = parts[3] == "x";
  s->labeled = parts[3] != "u" && !s->label_unreadable;
  if (s->labeled && !absl::SimpleAtoi(parts[3], &s->label)) return false;
  auto in_file = [&](int64_t offset, int64_t size) {
    return offset >= 0 && size >= 0 && offset <= st.st_size && size <= st.st_size - offset;
  };
  // Every range is checked: a stale or forged sidecar is rebuilt, not trusted.
  if (!in_file(s->offset, s->size) || !ValidLabel(s->label)) return false;
  for (size_t i = 4; i < parts.size(); i += 3) {
    TarShardSource::Member m;
    std::string ext;
    if (!absl::CUnescape(parts[i], &ext) || !absl::SimpleAtoi(parts[i + 1], &m.offset) ||
        !absl::SimpleAtoi(parts[i + 2], &m.size) || !in_file(m.offset, m.size)) {
      return false;
    }
    m.extension = table.Id(ext);
    s->members.push_back(m);
  }
  return true;
}

// Whether a sidecar's first line is the one IndexHeader makes for `st`; with
// `any_mtime`, whatever modification time it names (a streamed shard's
// sidecar was made where the shard was written; its first read checks it).
bool HeaderMatches(const std::string& line, const struct stat& st, const std::string& image_field, bool any_mtime) {
  const std::string want = IndexHeader(st, image_field);
  if (!any_mtime) return line == want;
  std::vector<absl::string_view> a = absl::StrSplit(line, ' '), b = absl::StrSplit(want, ' ');
  if (a.size() != b.size() || a.size() < 4) return false;
  a[3] = b[3] = "";  // magic, version, size, mtime[, field]
  return a == b;
}

bool LoadSidecar(const fs::path& shard, const struct stat& st, const std::string& image_field, ShardIndex* index,
                 bool any_mtime, const char* suffix) {
  std::ifstream in(SidecarPath(shard, image_field) + suffix);
  std::string line;
  if (!in || !std::getline(in, line) || !HeaderMatches(line, st, image_field, any_mtime)) return false;
  if (!std::getline(in, line) || line.rfind("damage\t", 0) != 0) return false;
  index->damage = line.substr(7);
  ExtensionTable table(&index->extensions);
  while (std::getline(in, line)) {
    TarShardSource::Sample s;
    if (!ParseSidecarLine(line, st, table, &s)) {
      LOG(WARNING) << "ignoring sidecar " << SidecarPath(shard, image_field)
                   << ": entry malformed or out of range: " << absl::CHexEscape(line.substr(0, 200));
      index->samples.clear();
      index->extensions.clear();
      return false;
    }
    index->samples.push_back(std::move(s));
  }
  return true;
}

void SaveSidecar(const fs::path& shard, const struct stat& st, const std::string& image_field, const ShardIndex& index,
                 const char* suffix) {
  std::ostringstream out;
  out << IndexHeader(st, image_field) << "\ndamage\t" << index.damage << "\n";
  for (const auto& s : index.samples) {
    out << absl::CEscape(s.key) << '\t' << s.offset << '\t' << s.size << '\t';
    if (s.labeled) {
      out << s.label;
    } else {
      out << (s.label_unreadable ? 'x' : 'u');
    }
    for (const auto& m : s.members) {
      out << '\t' << absl::CEscape(index.extensions[static_cast<size_t>(m.extension)]) << '\t' << m.offset << '\t'
          << m.size;
    }
    out << '\n';
  }
  // Servers sharing the directory (NFS) may write the same sidecar at once:
  // each write is whole and the contents agree. A read-only directory keeps
  // the index in memory only.
  (void)WriteFileAtomically(SidecarPath(shard, image_field) + suffix, out.str());
}

void LogIndexProblems(const std::string& shard, const ShardIndex& index) {
  if (index.bad_labels > 0) {
    LOG(WARNING) << "shard " << shard << ": " << index.bad_labels << " samples left out: their .cls label is not in 0.."
                 << TarShardSource::kMaxClasses - 1;
  }
  if (index.unparsed_labels > 0) {
    LOG(WARNING) << "shard " << shard << ": " << index.unparsed_labels
                 << " samples have a .cls member that is not an integer (or over 63 bytes): in batches with labels "
                    "they are bad samples (bad_field) under the session's bad_sample_policy";
  }
  if (index.duplicates > 0) {
    LOG(WARNING) << "shard " << shard << ": " << index.duplicates
                 << " members repeat a key and extension seen before in the shard (first: '"
                 << absl::CHexEscape(index.first_duplicate.substr(0, 200))
                 << "'); the first member of each key and extension is used, the others ignored";
  }
  if (index.skipped > 0) {
    LOG(WARNING) << "shard " << shard << ": " << index.skipped << " members skipped (first: " << index.first_skipped
                 << ")";
  }
}

// The *.tar files directly in `dir`, sorted; the non-throwing filesystem
// calls only (an unreadable entry is skipped, never an exception).
std::vector<fs::path> ListShards(const fs::path& dir) {
  std::vector<fs::path> shards;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    if (it->is_regular_file(entry_ec) && it->path().extension() == ".tar") shards.push_back(it->path());
  }
  std::sort(shards.begin(), shards.end());
  return shards;
}

}  // namespace tar_index

using tar_index::ReadAt;

absl::StatusOr<TarScan> ScanTar(const fs::path& path, int open_fd) {
  const int fd = open_fd >= 0 ? fcntl(open_fd, F_DUPFD_CLOEXEC, 0) : open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open shard ", path.string()));
  struct stat st;
  fstat(fd, &st);
  const int64_t file_size = st.st_size;
  TarScan scan;
  std::string long_name, pax_path, skip_reason;
  int64_t pax_size = -1;
  int64_t offset = 0;
  unsigned char h[kBlock];
  const std::string shard = path.filename().string();
  while (offset + kBlock <= file_size) {
    if (!ReadAt(fd, h, kBlock, offset)) {
      scan.damage = absl::StrCat("read error at offset ", offset);
      break;
    }
    if (std::all_of(h, h + kBlock, [](unsigned char c) { return c == 0; })) break;  // end of archive
    if (!ChecksumMatches(h)) {
      scan.damage = absl::StrCat("malformed tar header at offset ", offset);
      break;
    }
    int64_t size = ParseNumber(h + 124, 12);
    if (pax_size >= 0) size = pax_size;
    if (size < 0) {
      scan.damage = absl::StrCat("malformed size field at offset ", offset);
      break;
    }
    const int64_t data = offset + kBlock;
    if (size > file_size - data) {  // subtraction: data + size may overflow
      scan.damage = absl::StrCat("truncated member at offset ", offset, " (", size, " bytes, ",
                                 std::max<int64_t>(0, file_size - data), " present)");
      break;
    }
    const char type = static_cast<char>(h[156]);
    if ((type == 'L' || type == 'x') && size > kMaxTarRecordBytes) {
      // Its member is skipped: the name (or size) it carries is unknowable.
      skip_reason = absl::StrCat(type == 'L' ? "GNU long-name" : "pax", " record of ", size, " bytes at offset ",
                                 offset, " (at most ", kMaxTarRecordBytes, ")");
    } else if (type == 'L' || type == 'x') {  // the next header's long name / pax records
      std::string payload(static_cast<size_t>(size), '\0');
      if (!ReadAt(fd, payload.data(), static_cast<int64_t>(payload.size()), data)) {
        scan.damage = absl::StrCat("read error at offset ", data);
        break;
      }
      if (type == 'L') {
        long_name = payload.substr(0, strnlen(payload.c_str(), payload.size()));
      } else {
        ParsePax(payload, &pax_path, &pax_size);
      }
    } else {
      if (type == '0' || type == '\0' || type == '7') {
        std::string name = Field(h, 100);
        const std::string prefix = Field(h + 345, 155);
        if (std::memcmp(h + 257, "ustar", 5) == 0 && !prefix.empty()) name = prefix + "/" + name;
        if (!long_name.empty()) name = long_name;
        if (!pax_path.empty()) name = pax_path;
        if (skip_reason.empty() && static_cast<int64_t>(name.size()) > kMaxTarMemberName) {
          skip_reason = absl::StrCat("member name of ", name.size(), " bytes at offset ", offset, " (at most ",
                                     kMaxTarMemberName, ")");
        }
        if (skip_reason.empty()) {
          scan.members.push_back({name, data, size});
        } else if (scan.skipped++ == 0) {
          scan.first_skipped = skip_reason;
        }
      }
      long_name.clear();
      pax_path.clear();
      pax_size = -1;
      skip_reason.clear();
    }
    offset = data + (size + kBlock - 1) / kBlock * kBlock;
  }
  if (scan.damage.empty() && offset + kBlock > file_size && offset < file_size) {
    scan.damage = absl::StrCat("truncated tar header at offset ", offset);
  }
  close(fd);
  return scan;
}

}  // namespace stoker
