// Typed reads of JSON object fields for files Stoker did not necessarily
// write intact (manifests, a materialiser's progress records): each checks the
// value's JSON type before converting (nlohmann's get<int> of 1e30 is
// undefined behaviour) and throws std::invalid_argument naming the key.
// Header-only; thread-safe.
#ifndef STOKER_DATAPLANE_SOURCES_JSON_FIELDS_H_
#define STOKER_DATAPLANE_SOURCES_JSON_FIELDS_H_

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace stoker::json_fields {

inline const nlohmann::json& Field(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) throw std::invalid_argument(std::string("has no \"") + key + "\"");
  return j.at(key);
}

inline int64_t Int(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = Field(j, key);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw std::invalid_argument(std::string("\"") + key + "\" is out of range");
  }
  if (!v.is_number_integer()) throw std::invalid_argument(std::string("\"") + key + "\" is not an integer");
  return v.get<int64_t>();
}

inline std::string String(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = Field(j, key);
  if (!v.is_string()) throw std::invalid_argument(std::string("\"") + key + "\" is not a string");
  return v.get<std::string>();
}

inline std::vector<std::string> Strings(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = Field(j, key);
  if (!v.is_array()) throw std::invalid_argument(std::string("\"") + key + "\" is not an array");
  std::vector<std::string> out;
  for (const nlohmann::json& s : v) {
    if (!s.is_string()) throw std::invalid_argument(std::string("\"") + key + "\" holds a non-string");
    out.push_back(s.get<std::string>());
  }
  return out;
}

inline const nlohmann::json& Array(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = Field(j, key);
  if (!v.is_array()) throw std::invalid_argument(std::string("\"") + key + "\" is not an array");
  return v;
}

}  // namespace stoker::json_fields

#endif  // STOKER_DATAPLANE_SOURCES_JSON_FIELDS_H_
