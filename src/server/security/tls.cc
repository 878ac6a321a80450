// SPDX-License-Identifier: Apache-2.0
// Loading and checking TLS certificates and keys with OpenSSL; see tls.h.
#include "server/security/tls.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>

namespace kiln {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// The last OpenSSL error of this thread as text (the queue is cleared).
std::string OpenSslError() {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "no PEM data found";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

Result<std::string> ReadFile(const std::string& flag, const std::string& path) {
  if (path.empty()) return Status::InvalidArgument(fmt::format("{} is required", flag));
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::NotFound(
        fmt::format("{} '{}': cannot read the file: {}", flag, path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

BioPtr MemBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::string FormatAsn1Time(const ASN1_TIME* t) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return "an unreadable date";
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

int64_t Asn1ToUnix(const ASN1_TIME* t) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

// The first PEM certificate of `pem`; INVALID_ARGUMENT naming flag and file when there is none.
Result<X509Ptr> FirstCertificate(const std::string& flag, const std::string& path,
                                 const std::string& pem) {
  BioPtr bio = MemBio(pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return Status::InvalidArgument(
        fmt::format("{} '{}': the file holds no PEM certificate ({})", flag, path, OpenSslError()));
  }
  return cert;
}

}  // namespace

Result<TlsMaterial> LoadTlsMaterial(const TlsFiles& files, int64_t now_unix) {
  const std::string cert_flag = files.flag_prefix + "-server-cert";
  const std::string key_flag = files.flag_prefix + "-server-key";
  const std::string root_flag = files.flag_prefix + "-root-cert";
  TlsMaterial m;
  m.mutual = files.mutual;
  KILN_ASSIGN_OR_RETURN(m.cert_pem, ReadFile(cert_flag, files.cert_file));
  KILN_ASSIGN_OR_RETURN(m.key_pem, ReadFile(key_flag, files.key_file));
  if (files.mutual && files.root_file.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}-use-ssl-mutual needs {}: the CA certificates client certificates must chain to",
        files.flag_prefix, root_flag));
  }
  if (!files.root_file.empty()) {
    KILN_ASSIGN_OR_RETURN(m.root_pem, ReadFile(root_flag, files.root_file));
    KILN_ASSIGN_OR_RETURN(X509Ptr root, FirstCertificate(root_flag, files.root_file, m.root_pem));
  }
  KILN_ASSIGN_OR_RETURN(X509Ptr cert, FirstCertificate(cert_flag, files.cert_file, m.cert_pem));

  const time_t now = now_unix >= 0 ? static_cast<time_t>(now_unix) : std::time(nullptr);
  const ASN1_TIME* not_before = X509_get0_notBefore(cert.get());
  const ASN1_TIME* not_after = X509_get0_notAfter(cert.get());
  m.not_after_unix = Asn1ToUnix(not_after);
  time_t when = now;
  if (X509_cmp_time(not_after, &when) < 0) {
    return Status::InvalidArgument(fmt::format("{} '{}': the certificate expired on {}", cert_flag,
                                               files.cert_file, FormatAsn1Time(not_after)));
  }
  if (X509_cmp_time(not_before, &when) > 0) {
    return Status::InvalidArgument(fmt::format("{} '{}': the certificate is not valid before {}",
                                               cert_flag, files.cert_file,
                                               FormatAsn1Time(not_before)));
  }

  BioPtr key_bio = MemBio(m.key_pem);
  // No passphrase: an encrypted key fails here instead of prompting on the terminal.
  pem_password_cb* no_passphrase = [](char*, int, int, void*) { return 0; };
  PkeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, no_passphrase, nullptr));
  if (key == nullptr) {
    return Status::InvalidArgument(
        fmt::format("{} '{}': the file holds no unencrypted PEM private key ({})", key_flag,
                    files.key_file, OpenSslError()));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument(fmt::format("{} '{}' is not the private key of {} '{}'",
                                               key_flag, files.key_file, cert_flag,
                                               files.cert_file));
  }
  return m;
}

}  // namespace kiln
