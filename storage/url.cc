#include "storage/url.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stoker {

std::string Url::Origin() const {
  return port == 0 ? absl::StrCat(scheme, "://", host) : absl::StrCat(scheme, "://", host, ":", port);
}

absl::StatusOr<Url> ParseUrl(absl::string_view text) {
  const size_t colon = text.find("://");
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a URL (scheme://host/path)"));
  }
  Url url;
  url.scheme = absl::AsciiStrToLower(text.substr(0, colon));
  if (url.scheme != "http" && url.scheme != "https" && url.scheme != "s3" && url.scheme != "file") {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "': scheme '", url.scheme, "' is not one of s3, http, https, file"));
  }
  absl::string_view rest = text.substr(colon + 3);
  if (rest.find_first_of("?#") != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "': a store's URL takes no query or fragment"));
  }
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  url.path = slash == absl::string_view::npos ? "" : std::string(rest.substr(slash));
  if (authority.find('@') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(url.scheme,
                     " URL with credentials before '@': credentials never go in URLs (use the AWS variables or "
                     "profile, or a token file)"));
  }
  if (url.scheme == "file") {
    if (!authority.empty() && authority != "localhost") {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "': file URLs name this machine (file:///path)"));
    }
    return url;
  }
  const size_t port_colon = authority.rfind(':');
  if (port_colon != absl::string_view::npos && authority.find(']') == absl::string_view::npos) {
    int port = 0;
    if (!absl::SimpleAtoi(authority.substr(port_colon + 1), &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "': port '", authority.substr(port_colon + 1), "' is not a number in 1..65535"));
    }
    url.port = port;
    authority = authority.substr(0, port_colon);
  }
  if (authority.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "': no ", url.scheme == "s3" ? "bucket" : "host", " after ", url.scheme, "://"));
  }
  url.host = std::string(authority);
  return url;
}

std::string UriEncode(absl::string_view text, bool keep_slash) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(c);
    } else {
      absl::StrAppendFormat(&out, "%%%02X", u);
    }
  }
  return out;
}

std::string UriDecode(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    int value = 0;
    if (text[i] == '%' && i + 2 < text.size() && absl::SimpleHexAtoi(text.substr(i + 1, 2), &value)) {
      out.push_back(static_cast<char>(value));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ExpandBraces(absl::string_view pattern, int64_t max_names) {
  const size_t open = pattern.find('{');
  if (open == absl::string_view::npos) {
    if (pattern.find('}') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("'", pattern, "': '}' without '{'"));
    }
    return std::vector<std::string>{std::string(pattern)};
  }
  const size_t close = pattern.find('}', open);
  const size_t dots = pattern.find("..", open);
  int64_t first = 0, last = 0;
  if (close == absl::string_view::npos || dots == absl::string_view::npos || dots > close ||
      !absl::SimpleAtoi(pattern.substr(open + 1, dots - open - 1), &first) ||
      !absl::SimpleAtoi(pattern.substr(dots + 2, close - dots - 2), &last) || first < 0 || last < first) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", pattern, "': a brace range is {FIRST..LAST} with 0 <= FIRST <= LAST"));
  }
  const int width = static_cast<int>(dots - open - 1);
  absl::StatusOr<std::vector<std::string>> rest = ExpandBraces(pattern.substr(close + 1), max_names);
  if (!rest.ok()) return rest.status();
  if ((last - first + 1) * static_cast<int64_t>(rest->size()) > max_names) {
    return absl::InvalidArgumentError(absl::StrCat("'", pattern, "' names more than ", max_names, " objects"));
  }
  std::vector<std::string> out;
  for (int64_t i = first; i <= last; ++i) {
    const std::string head = absl::StrCat(pattern.substr(0, open), absl::StrFormat("%0*d", width, i));
    for (const std::string& tail : *rest) out.push_back(head + tail);
  }
  return out;
}

std::string JoinKey(absl::string_view base, absl::string_view key) {
  while (!base.empty() && base.back() == '/') base.remove_suffix(1);
  while (!key.empty() && key.front() == '/') key.remove_prefix(1);
  if (key.empty()) return std::string(base);
  return absl::StrCat(base, "/", key);
}

std::string TrimSlashes(absl::string_view path) {
  while (!path.empty() && path.front() == '/') path.remove_prefix(1);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  return std::string(path);
}

std::string ListingIndexKey(absl::string_view dir) {
  while (!dir.empty() && dir.back() == '/') dir.remove_suffix(1);
  return dir.empty() ? "index.txt" : absl::StrCat(dir, "/index.txt");
}

}  // namespace stoker
