#include "storage/aws_credentials.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

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

}  // namespace

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
  // 2. The shared credentials file, then the config file, for the profile.
  const std::string profile = Env("AWS_PROFILE").empty() ? "default" : Env("AWS_PROFILE");
  const std::string credentials_file = HomeFile("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
  const std::string config_file = HomeFile("AWS_CONFIG_FILE", ".aws/config");
  if (auto text = ReadFile(credentials_file)) {
    auto ini = ParseIni(*text);
    auto it = ini.find(profile);
    if (it != ini.end() && it->second.count("aws_access_key_id") && it->second.count("aws_secret_access_key")) {
      AwsCredentials c;
      c.access_key_id = it->second["aws_access_key_id"];
      c.secret_access_key = it->second["aws_secret_access_key"];
      if (it->second.count("aws_session_token")) c.session_token = it->second["aws_session_token"];
      c.source = absl::StrCat("profile '", profile, "' in ", credentials_file);
      return c;
    }
  }
  if (auto text = ReadFile(config_file)) {
    auto ini = ParseIni(*text);
    auto it = ini.find(profile == "default" ? "default" : absl::StrCat("profile ", profile));
    if (it != ini.end()) {
      if (it->second.count("aws_access_key_id") && it->second.count("aws_secret_access_key")) {
        AwsCredentials c;
        c.access_key_id = it->second["aws_access_key_id"];
        c.secret_access_key = it->second["aws_secret_access_key"];
        if (it->second.count("aws_session_token")) c.session_token = it->second["aws_session_token"];
        c.source = absl::StrCat("profile '", profile, "' in ", config_file);
        return c;
      }
      if (it->second.count("credential_process"))
        return RunCredentialProcess(it->second["credential_process"], profile);
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "no S3 credentials: looked in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, profile '", profile, "' in ",
      credentials_file, " and ", config_file,
      " (web identity, container and instance-metadata credentials are not read yet); for a public bucket use "
      "anonymous access"));
}

}  // namespace stoker
