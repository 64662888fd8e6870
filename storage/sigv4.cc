#include "storage/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "storage/url.h"

namespace stoker {
namespace {

std::string Hmac(absl::string_view key, absl::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &n);
  return std::string(reinterpret_cast<char*>(out), n);
}

// A header value as SigV4 canonicalises it: trimmed, inner runs of spaces
// collapsed to one.
std::string TrimValue(absl::string_view v) {
  std::string out;
  bool space = false;
  for (const char c : absl::StripAsciiWhitespace(v)) {
    if (c == ' ' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(digest), sizeof(digest)));
}

std::string CanonicalQuery(const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [k, v] : query) encoded.emplace_back(UriEncode(k, false), UriEncode(v, false));
  std::sort(encoded.begin(), encoded.end());  // by encoded name, then value
  std::vector<std::string> parts;
  parts.reserve(encoded.size());
  for (const auto& [k, v] : encoded) parts.push_back(absl::StrCat(k, "=", v));
  return absl::StrJoin(parts, "&");
}

std::string CanonicalRequest(const SigV4Request& request,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             std::string* signed_headers) {
  std::vector<std::pair<std::string, std::string>> canonical;
  for (const auto& [name, value] : headers) canonical.emplace_back(absl::AsciiStrToLower(name), TrimValue(value));
  std::sort(canonical.begin(), canonical.end());
  std::string header_block;
  std::vector<std::string> names;
  for (const auto& [name, value] : canonical) {
    absl::StrAppend(&header_block, name, ":", value, "\n");
    names.push_back(name);
  }
  *signed_headers = absl::StrJoin(names, ";");
  const std::string payload = request.payload_sha256.empty() ? Sha256Hex("") : request.payload_sha256;
  return absl::StrCat(request.method, "\n", request.path.empty() ? "/" : request.path, "\n",
                      CanonicalQuery(request.query), "\n", header_block, "\n", *signed_headers, "\n", payload);
}

std::vector<std::pair<std::string, std::string>> SignV4(const SigV4Request& request, const AwsCredentials& credentials,
                                                        absl::string_view region, absl::string_view service,
                                                        absl::Time now) {
  const std::string amz_date = absl::FormatTime("%Y%m%dT%H%M%SZ", now, absl::UTCTimeZone());
  const std::string day = amz_date.substr(0, 8);
  const std::string payload = request.payload_sha256.empty() ? Sha256Hex("") : request.payload_sha256;
  std::vector<std::pair<std::string, std::string>> added = {{"x-amz-date", amz_date},
                                                            {"x-amz-content-sha256", payload}};
  if (!credentials.session_token.empty()) added.emplace_back("x-amz-security-token", credentials.session_token);
  std::vector<std::pair<std::string, std::string>> signed_list = request.headers;
  signed_list.emplace_back("host", request.host);
  signed_list.insert(signed_list.end(), added.begin(), added.end());
  std::string signed_headers;
  const std::string canonical = CanonicalRequest(request, signed_list, &signed_headers);
  const std::string scope = absl::StrCat(day, "/", region, "/", service, "/aws4_request");
  const std::string to_sign = absl::StrCat("AWS4-HMAC-SHA256\n", amz_date, "\n", scope, "\n", Sha256Hex(canonical));
  std::string key = Hmac(absl::StrCat("AWS4", credentials.secret_access_key), day);
  key = Hmac(key, region);
  key = Hmac(key, service);
  key = Hmac(key, "aws4_request");
  const std::string signature = absl::BytesToHexString(Hmac(key, to_sign));
  added.emplace_back("Authorization",
                     absl::StrCat("AWS4-HMAC-SHA256 Credential=", credentials.access_key_id, "/", scope,
                                  ", SignedHeaders=", signed_headers, ", Signature=", signature));
  return added;
}

}  // namespace stoker
