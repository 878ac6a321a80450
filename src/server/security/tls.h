// SPDX-License-Identifier: Apache-2.0
#pragma once
// TLS material for the HTTP and gRPC listeners: the server's certificate chain and private key,
// and the CA certificates that client certificates must chain to under mutual TLS. Everything is
// read and checked with OpenSSL before a listener starts, so `kiln serve` refuses to start with a
// message naming the flag, the file and the problem instead of failing the first handshake:
//
//   TlsFiles files{"--http", cert_path, key_path, root_path, /*mutual=*/true};
//   KILN_ASSIGN_OR_RETURN(TlsMaterial tls, LoadTlsMaterial(files));
//   // HTTP: asio ssl::context from tls.*_pem; gRPC: grpc::SslServerCredentials from the same.
//
// Checks: each file is readable; the certificate file holds at least one PEM certificate and the
// first (the server's own) is valid now (not expired: the message names the expiry date; not yet
// valid: it names the start); the key file holds a private key that matches that certificate;
// the root file, required with mutual TLS, holds at least one PEM certificate.
//
// Thread safety: pure functions.

#include <cstdint>
#include <string>

#include "base/result.h"

namespace kiln {

struct TlsFiles {
  std::string flag_prefix;  // "--http" or "--grpc": names the flags in messages
  std::string cert_file;    // PEM: the server certificate, then its chain
  std::string key_file;     // PEM: its private key
  std::string root_file;    // PEM: CA certificates for client certificates (may be empty)
  bool mutual = false;      // require and verify a client certificate
};

struct TlsMaterial {
  std::string cert_pem;
  std::string key_pem;
  std::string root_pem;  // empty when no root file was given
  bool mutual = false;
  int64_t not_after_unix = 0;  // the server certificate's expiry
};

// Reads and checks the files (see above) at time `now_unix` (seconds since the epoch; -1: now).
// NOT_FOUND naming the flag and file when a file cannot be read; INVALID_ARGUMENT naming them for
// content that is not valid, a key that does not match, or a certificate outside its validity.
Result<TlsMaterial> LoadTlsMaterial(const TlsFiles& files, int64_t now_unix = -1);

}  // namespace kiln
