#include "storage/aws_credentials.h"

#include <tinyxml2.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "storage/http_client.h"
#include "storage/url.h"

namespace stoker {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string HomeFile(const char* env_name, const char* relative) {
  std::string path = Env(env_name);
  if (!path.empty()) return path;
  const std::string home = Env("HOME");
  return home.empty() ? "" : absl::StrCat(home, "/", relative);
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::StatusOr<AwsCredentials> RunCredentialProcess(const std::string& command, const std::string& profile) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return absl::UnavailableError(absl::StrCat("profile '", profile, "': credential_process could not start"));
  }
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0 && out.size() < (1 << 20)) out.append(buf, n);
  const int rc = ::pclose(pipe);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("profile '", profile, "': credential_process exited with status ", rc));
  }
  absl::StatusOr<AwsCredentials> c = ParseCredentialProcessOutput(out);
  if (!c.ok()) return absl::InvalidArgumentError(absl::StrCat("profile '", profile, "': ", c.status().message()));
  c->source = absl::StrCat("credential_process of profile '", profile, "'");
  return c;
}

// The keys a profile's section holds, if it holds both.
std::optional<AwsCredentials> KeysOf(const std::map<std::string, std::string>& section, std::string source) {
  auto key = section.find("aws_access_key_id"), secret = section.find("aws_secret_access_key");
  if (key == section.end() || secret == section.end()) return std::nullopt;
  AwsCredentials c;
  c.access_key_id = key->second;
  c.secret_access_key = secret->second;
  if (auto token = section.find("aws_session_token"); token != section.end()) c.session_token = token->second;
  c.source = std::move(source);
  return c;
}

StorageOptions EndpointOptions(int attempts) {
  StorageOptions o;
  o.connect_timeout = absl::Seconds(1);
  o.request_timeout = absl::Seconds(5);
  o.max_attempts = attempts;
  o.backoff_base = absl::Milliseconds(50);
  o.backoff_max = absl::Seconds(1);
  return o;
}

std::optional<std::string> ReadToken(const std::string& path) {
  std::optional<std::string> text = ReadFile(path);
  if (!text) return std::nullopt;
  return std::string(absl::StripAsciiWhitespace(*text));
}

absl::StatusOr<AwsCredentials> FromWebIdentity() {
  const std::string token_file = Env("AWS_WEB_IDENTITY_TOKEN_FILE"), role = Env("AWS_ROLE_ARN");
  std::optional<std::string> token = ReadToken(token_file);
  if (!token || token->empty()) {
    return absl::UnavailableError(absl::StrCat("web identity: token file ", token_file, " cannot be read or is empty"));
  }
  std::string endpoint = AwsEndpointFromEnv("AWS_ENDPOINT_URL_STS");
  if (endpoint.empty()) endpoint = absl::StrCat("https://sts.", AwsRegionFromEnv(), ".amazonaws.com");
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  const std::string session = Env("AWS_ROLE_SESSION_NAME").empty() ? "stoker" : Env("AWS_ROLE_SESSION_NAME");
  HttpRequest r;  // a form POST, as the AWS SDKs send it (the token stays out of URLs)
  r.method = "POST";
  r.url = endpoint + "/";
  r.body = CanonicalQuery({{"Action", "AssumeRoleWithWebIdentity"},
                           {"Version", "2011-06-15"},
                           {"RoleArn", role},
                           {"RoleSessionName", session},
                           {"WebIdentityToken", *token}});
  r.headers.emplace_back("Content-Type", "application/x-www-form-urlencoded");
  r.display_url = absl::StrCat(endpoint, "/ (AssumeRoleWithWebIdentity for ", role, ")");
  HttpClient client(EndpointOptions(4), nullptr);
  absl::StatusOr<HttpResponse> got = client.Fetch(r);
  if (!got.ok()) return absl::Status(got.status().code(), absl::StrCat("web identity: ", got.status().message()));
  absl::StatusOr<AwsCredentials> c = ParseWebIdentityResponse(got->body);
  if (!c.ok()) return absl::UnavailableError(absl::StrCat("web identity: ", c.status().message()));
  c->source = absl::StrCat("web identity for ", role);
  return c;
}

absl::StatusOr<AwsCredentials> FromContainer() {
  std::string url = Env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (url.empty()) url = absl::StrCat("http://169.254.170.2", Env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"));
  std::string token = Env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  if (!Env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE").empty()) {
    std::optional<std::string> t = ReadToken(Env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"));
    if (!t)
      return absl::UnavailableError("container credentials: AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE cannot be read");
    token = *t;
  }
  HttpRequest r;
  r.url = url;
  if (!token.empty()) r.headers.emplace_back("Authorization", token);
  HttpClient client(EndpointOptions(4), nullptr);
  absl::StatusOr<HttpResponse> got = client.Fetch(r);
  if (!got.ok())
    return absl::Status(got.status().code(), absl::StrCat("container credentials: ", got.status().message()));
  absl::StatusOr<AwsCredentials> c = ParseEndpointCredentials(got->body);
  if (!c.ok())
    return absl::UnavailableError(absl::StrCat("container credentials from ", url, ": ", c.status().message()));
  c->source = absl::StrCat("container credentials (", url, ")");
  return c;
}

absl::StatusOr<AwsCredentials> FromInstanceMetadata() {
  std::string base = Env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (base.empty()) base = "http://169.254.169.254";
  while (!base.empty() && base.back() == '/') base.pop_back();
  HttpClient client(EndpointOptions(2), nullptr);
  HttpRequest put;  // IMDSv2: a session token first
  put.method = "PUT";
  put.url = base + "/latest/api/token";
  put.headers.emplace_back("X-aws-ec2-metadata-token-ttl-seconds", "21600");
  absl::StatusOr<HttpResponse> token = client.Fetch(put);
  if (!token.ok())
    return absl::Status(token.status().code(), absl::StrCat("instance metadata: ", token.status().message()));
  const std::string header = std::string(absl::StripAsciiWhitespace(token->body));
  HttpRequest list;
  list.url = base + "/latest/meta-data/iam/security-credentials/";
  list.headers.emplace_back("X-aws-ec2-metadata-token", header);
  absl::StatusOr<HttpResponse> roles = client.Fetch(list);
  if (!roles.ok())
    return absl::Status(roles.status().code(), absl::StrCat("instance metadata: ", roles.status().message()));
  const std::string role(absl::StripAsciiWhitespace(absl::string_view(roles->body).substr(0, roles->body.find('\n'))));
  if (role.empty()) return absl::NotFoundError("instance metadata: the instance has no IAM role");
  HttpRequest get;
  get.url = list.url + UriEncode(role, false);
  get.headers.emplace_back("X-aws-ec2-metadata-token", header);
  absl::StatusOr<HttpResponse> got = client.Fetch(get);
  if (!got.ok()) return absl::Status(got.status().code(), absl::StrCat("instance metadata: ", got.status().message()));
  absl::StatusOr<AwsCredentials> c = ParseEndpointCredentials(got->body);
  if (!c.ok()) return absl::UnavailableError(absl::StrCat("instance metadata role ", role, ": ", c.status().message()));
  c->source = absl::StrCat("instance metadata role ", role);
  return c;
}

}  // namespace

std::string AwsRegionFromEnv() {
  for (const char* name : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    if (!Env(name).empty()) return Env(name);
  }
  return "us-east-1";
}

std::string AwsEndpointFromEnv(const char* service_variable) {
  return Env(service_variable).empty() ? Env("AWS_ENDPOINT_URL") : Env(service_variable);
}

absl::StatusOr<AwsCredentials> ParseEndpointCredentials(const std::string& json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("AccessKeyId") || !j.contains("SecretAccessKey") || !j["AccessKeyId"].is_string() ||
      !j["SecretAccessKey"].is_string()) {
    return absl::InvalidArgumentError("the answer is no JSON object with AccessKeyId and SecretAccessKey strings");
  }
  AwsCredentials c;
  c.access_key_id = j["AccessKeyId"].get<std::string>();
  c.secret_access_key = j["SecretAccessKey"].get<std::string>();
  if (j.contains("Token") && j["Token"].is_string()) c.session_token = j["Token"].get<std::string>();
  if (j.contains("Expiration") && j["Expiration"].is_string()) {
    std::string err;
    if (!absl::ParseTime(absl::RFC3339_full, j["Expiration"].get<std::string>(), &c.expiration, &err)) {
      return absl::InvalidArgumentError("the answer's Expiration is not an RFC 3339 time");
    }
  }
  return c;
}

absl::StatusOr<AwsCredentials> ParseWebIdentityResponse(const std::string& xml) {
  tinyxml2::XMLDocument doc;
  if (doc.Parse(xml.data(), xml.size()) != tinyxml2::XML_SUCCESS)
    return absl::InvalidArgumentError("STS's answer is not XML");
  const tinyxml2::XMLElement* e = doc.FirstChildElement("AssumeRoleWithWebIdentityResponse");
  if (e) e = e->FirstChildElement("AssumeRoleWithWebIdentityResult");
  if (e) e = e->FirstChildElement("Credentials");
  auto text = [&](const char* name) -> std::string {
    const tinyxml2::XMLElement* c = e ? e->FirstChildElement(name) : nullptr;
    return c && c->GetText() ? c->GetText() : "";
  };
  AwsCredentials c;
  c.access_key_id = text("AccessKeyId");
  c.secret_access_key = text("SecretAccessKey");
  c.session_token = text("SessionToken");
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    return absl::InvalidArgumentError("STS's answer holds no Credentials (AccessKeyId, SecretAccessKey)");
  }
  std::string err;
  if (!text("Expiration").empty() && !absl::ParseTime(absl::RFC3339_full, text("Expiration"), &c.expiration, &err)) {
    return absl::InvalidArgumentError("STS's Expiration is not an RFC 3339 time");
  }
  return c;
}

std::map<std::string, std::map<std::string, std::string>> ParseIni(const std::string& text) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::string section;
  std::istringstream in(text);
  std::string raw;
  while (std::getline(in, raw)) {
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = std::string(absl::StripAsciiWhitespace(line.substr(1, line.size() - 2)));
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos || section.empty()) continue;
    out[section][std::string(absl::StripAsciiWhitespace(line.substr(0, eq)))] =
        std::string(absl::StripAsciiWhitespace(line.substr(eq + 1)));
  }
  return out;
}

absl::StatusOr<AwsCredentials> ParseCredentialProcessOutput(const std::string& json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("AccessKeyId") || !j.contains("SecretAccessKey") || !j["AccessKeyId"].is_string() ||
      !j["SecretAccessKey"].is_string()) {
    return absl::InvalidArgumentError(
        "credential_process printed no JSON object with AccessKeyId and SecretAccessKey strings");
  }
  if (j.contains("Version") && j["Version"] != 1) {
    return absl::InvalidArgumentError("credential_process output has a Version other than 1");
  }
  AwsCredentials c;
  c.access_key_id = j["AccessKeyId"].get<std::string>();
  c.secret_access_key = j["SecretAccessKey"].get<std::string>();
  if (j.contains("SessionToken") && j["SessionToken"].is_string())
    c.session_token = j["SessionToken"].get<std::string>();
  if (j.contains("Expiration") && j["Expiration"].is_string()) {
    std::string err;
    if (!absl::ParseTime(absl::RFC3339_full, j["Expiration"].get<std::string>(), &c.expiration, &err)) {
      return absl::InvalidArgumentError("credential_process output's Expiration is not an RFC 3339 time");
    }
  }
  return c;
}

absl::StatusOr<AwsCredentials> AwsCredentialChain::Get() {
  absl::MutexLock lock(&mu_);
  if (cached_.has_value() && absl::Now() < cached_->expiration - absl::Minutes(5)) return *cached_;
  absl::StatusOr<AwsCredentials> c = Resolve();
  if (!c.ok()) return c.status();
  cached_ = *c;
  return c;
}

absl::StatusOr<AwsCredentials> AwsCredentialChain::Resolve() {
  // 1. The environment.
  if (!Env("AWS_ACCESS_KEY_ID").empty() && !Env("AWS_SECRET_ACCESS_KEY").empty()) {
    AwsCredentials c;
    c.access_key_id = Env("AWS_ACCESS_KEY_ID");
    c.secret_access_key = Env("AWS_SECRET_ACCESS_KEY");
    c.session_token = Env("AWS_SESSION_TOKEN");
    c.source = "environment";
    return c;
  }
  // 2. A web identity (Kubernetes service accounts).
  if (!Env("AWS_WEB_IDENTITY_TOKEN_FILE").empty() && !Env("AWS_ROLE_ARN").empty()) return FromWebIdentity();
  // 3. The shared credentials file, then the config file, for the profile.
  const std::string profile = Env("AWS_PROFILE").empty() ? "default" : Env("AWS_PROFILE");
  const std::string credentials_file = HomeFile("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
  const std::string config_file = HomeFile("AWS_CONFIG_FILE", ".aws/config");
  if (auto text = ReadFile(credentials_file)) {
    auto ini = ParseIni(*text);
    auto it = ini.find(profile);
    if (it != ini.end()) {
      if (auto c = KeysOf(it->second, absl::StrCat("profile '", profile, "' in ", credentials_file))) return *c;
    }
  }
  if (auto text = ReadFile(config_file)) {
    auto ini = ParseIni(*text);
    auto it = ini.find(profile == "default" ? "default" : absl::StrCat("profile ", profile));
    if (it != ini.end()) {
      if (auto c = KeysOf(it->second, absl::StrCat("profile '", profile, "' in ", config_file))) return *c;
      if (it->second.count("credential_process"))
        return RunCredentialProcess(it->second["credential_process"], profile);
    }
  }
  // 4. Container credentials (ECS, EKS Pod Identity).
  if (!Env("AWS_CONTAINER_CREDENTIALS_FULL_URI").empty() || !Env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").empty()) {
    return FromContainer();
  }
  // 5. The instance metadata service (IMDSv2).
  std::string imds = "the instance metadata service is turned off (AWS_EC2_METADATA_DISABLED)";
  if (absl::AsciiStrToLower(Env("AWS_EC2_METADATA_DISABLED")) != "true") {
    absl::StatusOr<AwsCredentials> c = FromInstanceMetadata();
    if (c.ok()) return c;
    imds = std::string(c.status().message());
  }
  return absl::NotFoundError(absl::StrCat(
      "no S3 credentials: looked in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_WEB_IDENTITY_TOKEN_FILE, profile '",
      profile, "' in ", credentials_file, " and ", config_file,
      ", AWS_CONTAINER_CREDENTIALS_FULL_URI / _RELATIVE_URI, and ", imds,
      "; for a public bucket use anonymous access"));
}

}  // namespace stoker
