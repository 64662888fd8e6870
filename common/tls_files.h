// Start-up checks of the PEM files TLS is configured with, so that a wrong
// path, a truncated file or a key that belongs to another certificate is a
// clear error naming the file (gRPC itself would only fail each handshake
// later). gRPC's certificate providers read the files again themselves and
// watch them for changes. Thread-safe (no state).
#ifndef STOKER_COMMON_TLS_FILES_H_
#define STOKER_COMMON_TLS_FILES_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace stoker {

// `cert_path` holds a PEM certificate chain and `key_path` the private key of
// its first certificate. INVALID_ARGUMENT naming the file and the problem
// (`what` names the flags, e.g. "--tls-cert"). A certificate outside its
// validity period is logged as a warning, not refused (clocks differ).
absl::Status CheckIdentityFiles(const std::string& cert_path, const std::string& key_path, const std::string& what);

// `path` holds one or more PEM CA certificates.
absl::Status CheckCaBundle(const std::string& path, const std::string& what);

// The subject of the first certificate in the PEM file, in OpenSSL's one-line
// form ("CN=server,O=Stoker"); empty if it cannot be read. For logs.
std::string CertificateSubject(const std::string& cert_path);

}  // namespace stoker

#endif  // STOKER_COMMON_TLS_FILES_H_
