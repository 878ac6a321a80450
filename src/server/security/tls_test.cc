// SPDX-License-Identifier: Apache-2.0
// LoadTlsMaterial on certificates made here with OpenSSL: a valid pair, an expired and a
// not-yet-valid certificate (the message names the date), a key of another certificate,
// missing and garbage files (the message names flag and file), mutual TLS without a root.
#include "server/security/tls.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace kiln {
namespace {

struct Pem {
  std::string cert;
  std::string key;
};

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

// A self-signed EC certificate valid from now + from_s to now + to_s.
Pem MakeCert(long from_s, long to_s) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), from_s);
  X509_gmtime_adj(X509_getm_notAfter(x), to_s);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509_sign(x, key, EVP_sha256());
  BIO* cb = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(cb, x);
  BIO* kb = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(kb, key, nullptr, nullptr, 0, nullptr, nullptr);
  Pem pem{BioText(cb), BioText(kb)};
  BIO_free(cb);
  BIO_free(kb);
  X509_free(x);
  EVP_PKEY_free(key);
  return pem;
}

class TlsTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  void SetUp() override {
    char tmpl[] = "/tmp/kiln_tls_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

TEST_F(TlsTest, ValidPairLoads) {
  const Pem p = MakeCert(-60, 3600);
  TlsFiles f{"--http", Write("c.pem", p.cert), Write("k.pem", p.key), Write("ca.pem", p.cert),
             true};
  Result<TlsMaterial> m = LoadTlsMaterial(f);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->cert_pem, p.cert);
  EXPECT_EQ(m->key_pem, p.key);
  EXPECT_EQ(m->root_pem, p.cert);
  EXPECT_TRUE(m->mutual);
  EXPECT_GT(m->not_after_unix, 0);
}

TEST_F(TlsTest, ExpiredCertificateNamesTheDate) {
  const Pem p = MakeCert(-7200, -3600);
  TlsFiles f{"--grpc", Write("c.pem", p.cert), Write("k.pem", p.key), "", false};
  Result<TlsMaterial> m = LoadTlsMaterial(f);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("--grpc-server-cert '" + f.cert_file +
                                      "': the certificate expired on "),
            std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find(" UTC"), std::string::npos);
}

TEST_F(TlsTest, NotYetValidCertificate) {
  const Pem p = MakeCert(3600, 7200);
  TlsFiles f{"--http", Write("c.pem", p.cert), Write("k.pem", p.key), "", false};
  Result<TlsMaterial> m = LoadTlsMaterial(f);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("is not valid before"), std::string::npos);
}

TEST_F(TlsTest, KeyOfAnotherCertificate) {
  const Pem a = MakeCert(-60, 3600);
  const Pem b = MakeCert(-60, 3600);
  TlsFiles f{"--http", Write("c.pem", a.cert), Write("k.pem", b.key), "", false};
  Result<TlsMaterial> m = LoadTlsMaterial(f);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("is not the private key of --http-server-cert"),
            std::string::npos)
      << m.status().message();
}

TEST_F(TlsTest, MissingAndGarbageFilesNameFlagAndFile) {
  const Pem p = MakeCert(-60, 3600);
  const std::string cert = Write("c.pem", p.cert);
  const std::string key = Write("k.pem", p.key);
  {
    TlsFiles f{"--http", dir_ + "/missing.pem", key, "", false};
    Result<TlsMaterial> m = LoadTlsMaterial(f);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
    EXPECT_NE(m.status().message().find("--http-server-cert '" + dir_ + "/missing.pem'"),
              std::string::npos)
        << m.status().message();
  }
  {
    TlsFiles f{"--http", cert, dir_ + "/nokey.pem", "", false};
    Result<TlsMaterial> m = LoadTlsMaterial(f);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("--http-server-key '"), std::string::npos);
  }
  {
    TlsFiles f{"--http", Write("junk.pem", "not a certificate"), key, "", false};
    Result<TlsMaterial> m = LoadTlsMaterial(f);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("holds no PEM certificate"), std::string::npos);
  }
  {
    TlsFiles f{"--http", cert, Write("junk.key", "nope"), "", false};
    Result<TlsMaterial> m = LoadTlsMaterial(f);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("holds no unencrypted PEM private key"), std::string::npos);
  }
  {
    TlsFiles f{"--grpc", cert, key, "", true};
    Result<TlsMaterial> m = LoadTlsMaterial(f);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("--grpc-use-ssl-mutual needs --grpc-root-cert"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace kiln
