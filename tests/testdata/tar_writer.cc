#include "tests/testdata/tar_writer.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace stoker::testing {
namespace {

std::string Header(const std::string& name, size_t size, char type, const std::string* raw_size = nullptr) {
  std::string h(512, '\0');
  std::memcpy(h.data(), name.data(), std::min<size_t>(name.size(), 100));
  std::snprintf(h.data() + 100, 8, "%07o", 0644);
  std::snprintf(h.data() + 108, 8, "%07o", 0);
  std::snprintf(h.data() + 116, 8, "%07o", 0);
  std::snprintf(h.data() + 124, 12, "%011zo", size);
  if (raw_size) std::memcpy(h.data() + 124, raw_size->data(), std::min<size_t>(raw_size->size(), 12));
  std::snprintf(h.data() + 136, 12, "%011o", 0);
  h[156] = type;
  std::memcpy(h.data() + 257, "ustar", 6);
  std::memcpy(h.data() + 263, "00", 2);
  std::memset(h.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h.data() + 148, 8, "%06o", sum);
  return h;
}

void Append(std::string& tar, const std::string& header, const std::string& data) {
  tar += header;
  tar += data;
  tar.append((512 - data.size() % 512) % 512, '\0');
}

}  // namespace

std::string TarArchive(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string tar;
  for (const auto& [name, content] : members) {
    if (name.size() > 100) Append(tar, Header("././@LongLink", name.size() + 1, 'L'), name + '\0');
    Append(tar, Header(name, content.size(), '0'), content);
  }
  tar.append(1024, '\0');
  return tar;
}

std::string TarMemberRaw(const std::string& name, const std::string& size_field, char type, const std::string& data) {
  std::string out;
  Append(out, Header(name, data.size(), type, &size_field), data);
  return out;
}

std::string TarPax(const std::vector<std::string>& records) {
  std::string body;
  for (const std::string& r : records) {
    // "<len> key=value\n", where len counts itself.
    size_t len = r.size() + 3;
    while (std::to_string(len).size() + r.size() + 2 != len) ++len;
    body += std::to_string(len) + " " + r + "\n";
  }
  std::string out;
  Append(out, Header("pax", body.size(), 'x'), body);
  return out;
}

}  // namespace stoker::testing
