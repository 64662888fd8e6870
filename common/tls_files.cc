#include "common/tls_files.h"

#include <cstdio>
#include <memory>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace stoker {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;
using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

absl::Status Open(const std::string& path, const std::string& what, File* file) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " names no file"));
  file->reset(std::fopen(path.c_str(), "r"));
  if (!*file) return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": ", strerror(errno)));
  return absl::OkStatus();
}

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "not PEM";
  char text[256];
  ERR_error_string_n(e, text, sizeof(text));
  return text;
}

absl::StatusOr<Cert> ReadCert(FILE* f, const std::string& path, const std::string& what) {
  Cert cert(PEM_read_X509(f, nullptr, nullptr, nullptr), &X509_free);
  if (!cert) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " holds no PEM certificate (", OpenSslError(), ")"));
  }
  return cert;
}

void WarnIfOutsideValidity(X509* cert, const std::string& path) {
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    LOG(WARNING) << "certificate " << path << " has expired; peers will refuse it";
  } else if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    LOG(WARNING) << "certificate " << path << " is not valid yet; peers will refuse it";
  }
}

}  // namespace

absl::Status CheckIdentityFiles(const std::string& cert_path, const std::string& key_path, const std::string& what) {
  File cf, kf;
  if (absl::Status s = Open(cert_path, what, &cf); !s.ok()) return s;
  if (absl::Status s = Open(key_path, what, &kf); !s.ok()) return s;
  absl::StatusOr<Cert> cert = ReadCert(cf.get(), cert_path, what);
  if (!cert.ok()) return cert.status();
  Key key(PEM_read_PrivateKey(kf.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (!key) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", key_path, " holds no unencrypted PEM private key (", OpenSslError(), ")"));
  }
  if (X509_check_private_key(cert->get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the key in ", key_path, " does not belong to the certificate in ", cert_path));
  }
  WarnIfOutsideValidity(cert->get(), cert_path);
  return absl::OkStatus();
}

absl::Status CheckCaBundle(const std::string& path, const std::string& what) {
  File f;
  if (absl::Status s = Open(path, what, &f); !s.ok()) return s;
  absl::StatusOr<Cert> cert = ReadCert(f.get(), path, what);
  return cert.status();
}

std::string CertificateSubject(const std::string& cert_path) {
  File f(std::fopen(cert_path.c_str(), "r"));
  if (!f) return "";
  Cert cert(PEM_read_X509(f.get(), nullptr, nullptr, nullptr), &X509_free);
  ERR_clear_error();
  if (!cert) return "";
  char* line = X509_NAME_oneline(X509_get_subject_name(cert.get()), nullptr, 0);
  if (!line) return "";
  std::string subject(line);
  OPENSSL_free(line);
  return subject;
}

}  // namespace stoker
