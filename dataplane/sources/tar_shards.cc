#include "dataplane/sources/tar_shards.h"

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
#include "absl/strings/str_join.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"
#include "common/atomic_file.h"
#include "dataplane/sources/dataset.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/decode/video_index_cache.h"

namespace stoker {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kBlock = 512;
// Sidecar format. Load-bearing: bump the version when the format changes;
// sidecars of another version are rebuilt (3: label "x", a .cls that is not
// an integer).
constexpr char kIndexMagic[] = "stoker-tar-index 3";
constexpr char kIndexSuffix[] = ".stoker-index";

bool ReadAt(int fd, void* buf, int64_t size, int64_t offset) {
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

// The sample's member: `wanted` empty, any of the image extensions;
// kAudioMembers or kVideoMembers, any audio or video extension (dataset.h);
// else exactly that field.
constexpr char kAudioMembers[] = "@audio";
constexpr char kVideoMembers[] = "@video";
bool IsImageField(const std::string& field, const std::string& wanted) {
  static const auto* kImage = new std::set<std::string>{"jpg", "jpeg", "png", "webp"};
  if (wanted.empty()) return kImage->count(field) > 0;
  if (wanted == kAudioMembers) return AudioExtensions().count("." + field) > 0;
  if (wanted == kVideoMembers) return VideoExtensions().count("." + field) > 0;
  return field == wanted;
}

// Each kind of member keeps its own sidecar, so that a dataset opened for
// images first (and found to have none) does not rebuild the other's.
std::string SidecarPath(const fs::path& shard, const std::string& image_field) {
  if (image_field == kAudioMembers) return shard.string() + kIndexSuffix + "-audio";
  if (image_field == kVideoMembers) return shard.string() + kIndexSuffix + "-video";
  return shard.string() + kIndexSuffix;
}

struct ShardIndex {
  std::vector<TarShardSource::Sample> samples;  // Member::extension indexes `extensions`
  std::vector<std::string> extensions;
  std::string damage;
  int64_t bad_labels = 0;     // samples left out: a .cls beyond kMaxClasses
  int64_t unparsed_labels = 0;  // a .cls that is not an integer: a bad sample where labels are served
  int64_t duplicates = 0;     // members whose key and extension came before
  std::string first_duplicate;
  int64_t skipped = 0;        // members ScanTar left out
  std::string first_skipped;
};

bool ValidLabel(int64_t label) { return label >= 0 && label < TarShardSource::kMaxClasses; }

// Interns extensions into one table.
class ExtensionTable {
 public:
  explicit ExtensionTable(std::vector<std::string>* names) : names_(names) {
    for (size_t i = 0; i < names_->size(); ++i) ids_.emplace((*names_)[i], static_cast<int32_t>(i));
  }
  int32_t Id(const std::string& ext) {
    auto [it, inserted] = ids_.emplace(ext, static_cast<int32_t>(names_->size()));
    if (inserted) names_->push_back(ext);
    return it->second;
  }

 private:
  std::vector<std::string>* names_;
  std::map<std::string, int32_t> ids_;
};

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
  std::map<std::string, size_t> by_key;  // key -> position in index.samples
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
  index.samples.erase(std::remove_if(index.samples.begin(), index.samples.end(),
                                     [](const auto& s) { return s.offset < 0; }),
                      index.samples.end());
  const auto bad = std::remove_if(index.samples.begin(), index.samples.end(), [](const auto& s) { return s.label < 0; });
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

// Where an index built here from a streamed shard's bytes is kept (beside
// the sidecar the store may hold, which it never replaces).
constexpr char kBuiltHereSuffix[] = ".here";

bool LoadSidecar(const fs::path& shard, const struct stat& st, const std::string& image_field, ShardIndex* index,
                 bool any_mtime = false, const char* suffix = "") {
  std::ifstream in(SidecarPath(shard, image_field) + suffix);
  std::string line;
  if (!in || !std::getline(in, line) || !HeaderMatches(line, st, image_field, any_mtime)) return false;
  if (!std::getline(in, line) || line.rfind("damage\t", 0) != 0) return false;
  index->damage = line.substr(7);
  ExtensionTable table(&index->extensions);
  while (std::getline(in, line)) {
    TarShardSource::Sample s;
    if (!ParseSidecarLine(line, st, table, &s)) {
      LOG(WARNING) << "ignoring sidecar " << SidecarPath(shard, image_field) << ": entry malformed or out of range: "
                   << absl::CHexEscape(line.substr(0, 200));
      index->samples.clear();
      index->extensions.clear();
      return false;
    }
    index->samples.push_back(std::move(s));
  }
  return true;
}

void SaveSidecar(const fs::path& shard, const struct stat& st, const std::string& image_field, const ShardIndex& index,
                 const char* suffix = "") {
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

}  // namespace

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

namespace {

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

}  // namespace

bool HasTarShards(const fs::path& dir) { return !ListShards(dir).empty(); }

absl::StatusOr<std::shared_ptr<const TarShardSource>> TarShardSource::Open(const fs::path& dir, int64_t max_file_bytes,
                                                                           const std::atomic<bool>* cancelled,
                                                                           const ShardSelection* selection,
                                                                           MediaKind media,
                                                                           const StreamedShards* streamed) {
  std::shared_ptr<TarShardSource> source(new TarShardSource());
  source->max_file_bytes_ = max_file_bytes;
  source->media_ = media;
  const std::string image_field = selection != nullptr          ? selection->image_field
                                  : media == MediaKind::kAudio ? kAudioMembers
                                  : media == MediaKind::kVideo ? kVideoMembers
                                                               : "";
  source->image_field_ = image_field;
  std::map<std::string, ObjectInfo> remote;  // streamed shards by file name
  if (streamed != nullptr) {
    source->hold_ = streamed->hold;
    source->prefetch_ = streamed->prefetch;
    for (const ObjectInfo& o : streamed->shards) remote[fs::path(o.key).filename().string()] = o;
  }
  if (selection != nullptr) {
    for (const std::string& name : selection->shards) source->shard_paths_.push_back(dir / name);
  } else {
    source->shard_paths_ = ListShards(dir);
    source->shard_paths_.erase(std::remove_if(source->shard_paths_.begin(), source->shard_paths_.end(),
                                              [&](const fs::path& p) { return remote.count(p.filename().string()); }),
                               source->shard_paths_.end());
    for (const auto& [name, o] : remote) source->shard_paths_.push_back(dir / name);
    std::sort(source->shard_paths_.begin(), source->shard_paths_.end());
  }
  // Streamed shards that no sidecar indexes are fetched to be indexed: all
  // of them start coming now (the read-ahead), not one after another.
  if (source->prefetch_) {
    for (const fs::path& shard : source->shard_paths_) {
      auto in_store = remote.find(shard.filename().string());
      if (in_store == remote.end()) continue;
      std::error_code ec;
      if (!fs::exists(SidecarPath(shard, image_field) + kBuiltHereSuffix, ec) &&
          !fs::exists(SidecarPath(shard, image_field), ec)) {
        source->prefetch_(in_store->second.key);
      }
    }
  }
  int32_t max_label = -1;
  int64_t bad_labels = 0;
  ExtensionTable table(&source->extension_names_);
  for (size_t i = 0; i < source->shard_paths_.size(); ++i) {
    const fs::path& shard = source->shard_paths_[i];
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      return absl::CancelledError(absl::StrCat("opening ", dir.string(), " cancelled"));
    }
    auto in_store = remote.find(shard.filename().string());
    const bool is_streamed = in_store != remote.end();
    struct stat st {};
    if (is_streamed) {  // its stamp is the store's object's
      source->fds_.push_back(-1);
      source->objects_.push_back(in_store->second);
      st.st_size = in_store->second.size;
      st.st_mtim.tv_sec = in_store->second.mtime_ns / 1'000'000'000;
      st.st_mtim.tv_nsec = in_store->second.mtime_ns % 1'000'000'000;
    } else {
      const int fd = open(shard.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open shard ", shard.string()));
      source->fds_.push_back(fd);
      source->objects_.emplace_back();
      fstat(fd, &st);
    }
    source->shard_stamps_.push_back(StampOf(st));
    ShardIndex index;
    std::optional<absl::Status> checked;  // a streamed shard indexed from its own bytes needs no check
    // A streamed shard's index: one built here for this version (size and
    // time), else the store's sidecar (checked at the first read), else built.
    const bool loaded = is_streamed ? LoadSidecar(shard, st, image_field, &index, false, kBuiltHereSuffix) ||
                                          (index = ShardIndex(), LoadSidecar(shard, st, image_field, &index, true))
                                    : LoadSidecar(shard, st, image_field, &index);
    if (!loaded) {
      index = ShardIndex();
      std::shared_ptr<const HeldObject> held;
      absl::StatusOr<int> fd = source->fds_.back();
      if (is_streamed) {  // no sidecar in the store: the shard is fetched once to index it
        absl::StatusOr<std::shared_ptr<const HeldObject>> h = source->hold_(in_store->second.key, cancelled);
        if (!h.ok()) return h.status();
        held = *std::move(h);
        fd = held->fd();
        checked = absl::OkStatus();
      }
      absl::StatusOr<ShardIndex> built = BuildIndex(shard, *fd, image_field);
      if (!built.ok()) return built.status();
      index = *std::move(built);
      SaveSidecar(shard, st, image_field, index, is_streamed ? kBuiltHereSuffix : "");
    }
    {
      absl::MutexLock lock(&source->checked_mu_);  // not shared yet; the lock keeps the analysis whole
      source->checked_.push_back(checked);
    }
    source->shard_damage_.push_back(index.damage);
    source->first_sample_.push_back(static_cast<int64_t>(source->samples_.size()));
    LogIndexProblems(shard.filename().string(), index);
    bad_labels += index.bad_labels;
    std::vector<int32_t> ids;  // the shard's extension ids in the source's table
    for (const std::string& ext : index.extensions) ids.push_back(table.Id(ext));
    for (Sample& s : index.samples) {
      for (Member& m : s.members) m.extension = ids[static_cast<size_t>(m.extension)];
      if (!s.labeled) ++source->unlabeled_;
    }
    if (!index.damage.empty()) {
      const std::string what = absl::StrCat(shard.filename().string(), ": ", index.damage);
      LOG(WARNING) << "shard " << what << "; the " << index.samples.size() << " samples before it are used";
      source->damage_.push_back(what);
    }
    for (Sample& s : index.samples) {
      s.shard = static_cast<int32_t>(i);
      max_label = std::max(max_label, s.label);
      source->samples_.push_back(std::move(s));
    }
  }
  const char* what = media == MediaKind::kAudio   ? "an audio member"
                     : media == MediaKind::kVideo ? "a video member"
                                                  : "an image";
  if (source->samples_.empty() && bad_labels > 0) {
    return absl::DataLossError(absl::StrCat("dataset ", dir.string(), ": every sample with ", what, " (", bad_labels,
                                            ") has a .cls label outside 0..", kMaxClasses - 1));
  }
  if (source->samples_.empty()) {
    return absl::NotFoundError(absl::StrCat("dataset ", dir.string(), " has tar shards but no samples with ", what));
  }
  if (source->unlabeled_ > 0) {
    LOG(WARNING) << "dataset " << dir.string() << ": " << source->unlabeled_ << " of " << source->samples_.size()
                 << " samples have no class label (no .cls member, or one that is not an integer): those without "
                    "a .cls are served with label 0 in (images, labels) batches and a class field fails them as "
                    "missing_field; those whose .cls is not an integer fail as bad_field";
  }
  source->first_sample_.push_back(static_cast<int64_t>(source->samples_.size()));
  for (int32_t l = 0; l <= max_label; ++l) source->class_names_.push_back(std::to_string(l));
  FingerprintBuilder fingerprint;
  for (const fs::path& p : source->shard_paths_) fingerprint.Add(p.filename().string());
  for (const Sample& s : source->samples_) fingerprint.Add(s.shard).Add(s.key).Add(s.size).Add(s.label);
  source->fingerprint_ = fingerprint.Finish();
  return std::shared_ptr<const TarShardSource>(std::move(source));
}

absl::StatusOr<std::string> TarShardSource::ReadField(int64_t index, const std::vector<std::string>& extensions,
                                                      std::string* which, int64_t max_bytes) const {
  const Sample& s = samples_[index];
  for (const std::string& ext : extensions) {
    for (const Member& m : s.members) {
      if (extension_names_[static_cast<size_t>(m.extension)] != ext) continue;
      if (which != nullptr) *which = ext;
      if (max_bytes > 0 && m.size > max_bytes) {
        return DecodeError(DecodeFailure::kTooLarge, absl::StrCat(Describe(index), ".", ext, " holds ", m.size,
                                                                  " bytes; the session's max_field_bytes is ", max_bytes));
      }
      return ReadRange(index, ext, m.offset, m.size);
    }
  }
  std::vector<std::string> present;
  for (const Member& m : s.members) present.push_back(extension_names_[static_cast<size_t>(m.extension)]);
  return DecodeError(DecodeFailure::kMissingField,
                     absl::StrCat(Describe(index), " has no member ", absl::StrJoin(extensions, " or "), " (it has ",
                                  absl::StrJoin(present, ", "), ")"));
}

std::vector<std::string> TarShardSource::FieldMembers(int64_t index) const {
  const Sample& s = samples_[index];
  std::vector<std::string> names;
  for (const Member& m : s.members) {
    const std::string& ext = extension_names_[static_cast<size_t>(m.extension)];
    if (m.offset == s.offset || ext == "cls") continue;  // the image and the label
    names.push_back(ext);
  }
  return names;
}

absl::StatusOr<std::string> TarShardSource::ReadRange(int64_t index, const std::string& ext, int64_t offset,
                                                      int64_t size) const {
  const std::string where = ext.empty() ? Describe(index) : absl::StrCat(Describe(index), ".", ext);
  if (max_file_bytes_ > 0 && size > max_file_bytes_) {
    return DecodeError(DecodeFailure::kTooLarge,
                       absl::StrCat(where, " holds ", size, " bytes; --max-file-bytes is ", max_file_bytes_));
  }
  std::shared_ptr<const HeldObject> held;
  absl::StatusOr<int> fd = ShardFd(samples_[index].shard, &held);
  if (!fd.ok()) return absl::Status(fd.status().code(), absl::StrCat(where, ": ", fd.status().message()));
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!ReadAt(*fd, bytes.data(), size, offset)) {
    return absl::DataLossError(absl::StrCat("short read of ", where, " at offset ", offset));
  }
  return bytes;
}

absl::StatusOr<int> TarShardSource::ShardFd(int32_t shard, std::shared_ptr<const HeldObject>* held) const {
  if (fds_[shard] >= 0) return fds_[shard];
  const ObjectInfo& object = objects_[shard];
  absl::StatusOr<std::shared_ptr<const HeldObject>> h = hold_(object.key, nullptr);
  if (!h.ok()) return h.status();
  *held = *std::move(h);
  absl::MutexLock lock(&checked_mu_);
  std::optional<absl::Status>& checked = checked_[shard];
  if (!checked) {  // the first read in this process: does the index describe these bytes?
    absl::StatusOr<ShardIndex> built = BuildIndex(shard_paths_[shard], (*held)->fd(), image_field_);
    bool same = built.ok() && built->damage == shard_damage_[shard] &&
                static_cast<int64_t>(built->samples.size()) == first_sample_[shard + 1] - first_sample_[shard];
    for (size_t i = 0; same && i < built->samples.size(); ++i) {
      const Sample& a = built->samples[i];
      const Sample& b = samples_[first_sample_[shard] + static_cast<int64_t>(i)];
      same = a.key == b.key && a.offset == b.offset && a.size == b.size && a.label == b.label &&
             a.labeled == b.labeled && a.label_unreadable == b.label_unreadable && a.members.size() == b.members.size();
      for (size_t m = 0; same && m < a.members.size(); ++m) {
        same = a.members[m].offset == b.members[m].offset && a.members[m].size == b.members[m].size &&
               built->extensions[static_cast<size_t>(a.members[m].extension)] ==
                   extension_names_[static_cast<size_t>(b.members[m].extension)];
      }
    }
    checked = same ? absl::OkStatus()
                   : absl::DataLossError(absl::StrCat(
                         "shard ", shard_paths_[shard].filename().string(), " (", object.key,
                         ") does not match its index (the sidecar beside it in the store was made for other bytes, or "
                         "the shard changed): its samples fail until the dataset is indexed again (remove the stale ",
                         shard_paths_[shard].filename().string(), kIndexSuffix, " from the store)"));
    if (!same) {
      LOG(ERROR) << checked->message();
      // An index built here for other bytes (a store without modification
      // times) is not loaded again: the next open builds it afresh.
      std::error_code ec;
      fs::remove(SidecarPath(shard_paths_[shard], image_field_) + kBuiltHereSuffix, ec);
    }
  }
  if (!checked->ok()) return *checked;
  return (*held)->fd();
}

void TarShardSource::WillRead(const int64_t* indices, int64_t n) const {
  if (!prefetch_) return;
  std::set<int32_t> shards;  // each once (a batch in the global order spans many)
  for (int64_t i = 0; i < n; ++i) {
    const int32_t shard = samples_[indices[i]].shard;
    if (fds_[shard] < 0) shards.insert(shard);
  }
  for (int32_t shard : shards) prefetch_(objects_[shard].key);
}

TarShardSource::~TarShardSource() {
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

std::string TarShardSource::Describe(int64_t index) const {
  const Sample& s = samples_[index];
  return absl::StrCat(shard_paths_[s.shard].filename().string(), ":", s.key);
}

absl::Status TarShardSource::LabelStatus(int64_t index) const {
  if (!samples_[index].label_unreadable) return absl::OkStatus();
  std::string which;
  absl::StatusOr<std::string> text = ReadField(index, {"cls"}, &which, /*max_bytes=*/63);
  const std::string shown = text.ok() ? absl::StrCat("'", absl::CHexEscape(*text), "'") : "over 63 bytes";
  return DecodeError(DecodeFailure::kBadField, absl::StrCat(Describe(index), ".cls holds ", shown,
                                                            ", not an integer class label"));
}

absl::StatusOr<std::string> TarShardSource::Read(int64_t index) const {
  const Sample& s = samples_[index];
  return ReadRange(index, "", s.offset, s.size);
}

std::optional<SampleSource::MediaIndexHome> TarShardSource::MediaIndexHomeOf(int64_t index) const {
  // A streamed shard's frame index is not kept: the shard is not here.
  if (media_ != MediaKind::kVideo || fds_[samples_[index].shard] < 0) return std::nullopt;
  const Sample& s = samples_[index];
  const fs::path& shard = shard_paths_[s.shard];
  return MediaIndexHome{fs::path(shard.string() + kVideoIndexFolderSuffix) / std::to_string(s.offset), shard,
                        shard_stamps_[s.shard], s.size};
}

std::vector<int64_t> TarShardSource::ShardSizes() const {
  std::vector<int64_t> sizes;  // samples are numbered shard by shard
  int32_t shard = -1;
  for (const Sample& sample : samples_) {
    if (sizes.empty() || sample.shard != shard) sizes.push_back(0);
    shard = sample.shard;
    ++sizes.back();
  }
  return sizes;
}

}  // namespace stoker
