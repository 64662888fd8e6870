// Where S3 credentials come from, in the AWS tools' order: the environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN); a web
// identity (AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, exchanged with STS
// AssumeRoleWithWebIdentity: Kubernetes service accounts); the shared
// credentials and config files for AWS_PROFILE (or "default"), including the
// config's credential_process; container credentials
// (AWS_CONTAINER_CREDENTIALS_FULL_URI / _RELATIVE_URI with
// AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE): ECS, EKS Pod Identity); the
// instance metadata service with IMDSv2 tokens (AWS_EC2_METADATA_DISABLED=true
// turns it off, AWS_EC2_METADATA_SERVICE_ENDPOINT moves it). What was found
// is kept and fetched again 5 minutes before it expires. Thread-safe. No
// secret ever appears in a Status message.
#ifndef STOKER_STORAGE_AWS_CREDENTIALS_H_
#define STOKER_STORAGE_AWS_CREDENTIALS_H_

#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "storage/sigv4.h"

namespace stoker {

// The region requests are signed for, as the AWS tools find it: AWS_REGION,
// else AWS_DEFAULT_REGION, else us-east-1.
std::string AwsRegionFromEnv();

// The endpoint the AWS tools use for one service: `service_variable`
// (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_STS), else AWS_ENDPOINT_URL; empty
// when neither is set.
std::string AwsEndpointFromEnv(const char* service_variable);

// The sections of an INI file ("[name]" -> key -> value); config files name
// profiles "[profile name]", which is kept as written.
std::map<std::string, std::map<std::string, std::string>> ParseIni(const std::string& text);

// Credentials from credential_process's JSON output (Version 1).
absl::StatusOr<AwsCredentials> ParseCredentialProcessOutput(const std::string& json);

// Credentials from the container or instance-metadata endpoint's JSON
// (AccessKeyId, SecretAccessKey, Token, Expiration).
absl::StatusOr<AwsCredentials> ParseEndpointCredentials(const std::string& json);

// Credentials from STS's AssumeRoleWithWebIdentity answer (XML).
absl::StatusOr<AwsCredentials> ParseWebIdentityResponse(const std::string& xml);

class AwsCredentialChain {
 public:
  // NOT_FOUND naming every place looked when none has credentials.
  absl::StatusOr<AwsCredentials> Get();

 private:
  absl::StatusOr<AwsCredentials> Resolve();

  absl::Mutex mu_;
  std::optional<AwsCredentials> cached_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_STORAGE_AWS_CREDENTIALS_H_
